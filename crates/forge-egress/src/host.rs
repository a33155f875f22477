//! Host and authority parsing: turns the host part of a URL, a CONNECT target or a policy entry into a
//! [`NormalHost`] (a lowercase ASCII name, or a canonical IP literal), refusing anything ambiguous.
//!
//! Invariants kept here (each has a named test in `tests/host.rs` or below):
//! - Only canonical dotted-quad IPv4 (`1.2.3.4`, no leading zeros) and bracketed IPv6 are IP literals.
//!   A name whose last label is numeric (`127.1`, `0`, `8.8.2056`, `0x7f.1`, `2130706433`) is an
//!   attempted IP in a non-canonical spelling and is refused, never interpreted, never looked up.
//! - Names are lowercased, one trailing dot is removed, IDN labels become punycode; empty labels,
//!   labels over 63 bytes, names over 253 bytes, `%`, NUL, backslash, `@` (userinfo), whitespace and
//!   other characters outside `[a-z0-9-_.]` are refused.
//! - Raw non-ASCII is refused on the wire (proxy input); URLs given to forge's own client and the CLI
//!   may use Unicode names, which are converted to punycode with UTS #46 first.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A host after normalisation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NormalHost {
    /// A lowercase ASCII DNS name without trailing dot (IDN labels in punycode).
    Name(String),
    /// A canonical IP literal.
    Ip(IpAddr),
}

impl NormalHost {
    /// The IP when the host is an IP literal.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            NormalHost::Ip(ip) => Some(*ip),
            NormalHost::Name(_) => None,
        }
    }

    /// The form used in a URL authority or a `Host` header (`[v6]` bracketed).
    pub fn authority_form(&self) -> String {
        match self {
            NormalHost::Name(n) => n.clone(),
            NormalHost::Ip(IpAddr::V4(v4)) => v4.to_string(),
            NormalHost::Ip(IpAddr::V6(v6)) => format!("[{v6}]"),
        }
    }

    /// True for `localhost` and names under `.localhost` (RFC 6761: always loopback).
    pub fn is_localhost_name(&self) -> bool {
        matches!(self, NormalHost::Name(n) if n == "localhost" || n.ends_with(".localhost"))
    }
}

impl fmt::Display for NormalHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.authority_form())
    }
}

/// Why a host or authority was refused as malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// The input as received (truncated to 200 characters for display).
    pub input: String,
    /// What is wrong with it.
    pub why: String,
}

impl Malformed {
    pub(crate) fn new(input: &str, why: impl Into<String>) -> Self {
        let mut shown: String = input.chars().take(200).collect();
        if shown.len() < input.len() {
            shown.push('…');
        }
        Malformed {
            input: shown,
            why: why.into(),
        }
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed host {:?}: {}", self.input, self.why)
    }
}

/// Normalise a host (no port, IPv6 in brackets). `allow_unicode` permits IDN input (forge's own URLs);
/// on the wire (proxy) pass `false`.
pub fn normalize_host(raw: &str, allow_unicode: bool) -> Result<NormalHost, Malformed> {
    if raw.is_empty() {
        return Err(Malformed::new(raw, "empty host"));
    }
    if let Some(inner) = raw.strip_prefix('[') {
        let Some(inner) = inner.strip_suffix(']') else {
            return Err(Malformed::new(raw, "unterminated IPv6 literal"));
        };
        if inner.contains('%') {
            return Err(Malformed::new(raw, "IPv6 zone identifiers are not allowed"));
        }
        return inner
            .parse::<Ipv6Addr>()
            .map(|v6| NormalHost::Ip(IpAddr::V6(v6)))
            .map_err(|_| Malformed::new(raw, "invalid IPv6 literal"));
    }
    for c in raw.chars() {
        let why = match c {
            '%' => "percent-encoding is not allowed in a host",
            '\0' => "NUL byte in host",
            '\\' => "backslash in host",
            '@' => "userinfo (`user@`) is not allowed",
            ':' => "unbracketed `:` in host (IPv6 literals must be in brackets)",
            '/' | '?' | '#' => "URL delimiter in host",
            '[' | ']' => "stray bracket in host",
            c if c.is_whitespace() || c.is_control() => "whitespace or control character in host",
            c if !c.is_ascii() && !allow_unicode => "raw non-ASCII in host (use punycode)",
            _ => continue,
        };
        return Err(Malformed::new(raw, why));
    }
    let ascii: String = if raw.is_ascii() {
        raw.to_ascii_lowercase()
    } else {
        match idna::domain_to_ascii_cow(raw.as_bytes(), idna::AsciiDenyList::URL) {
            Ok(s) => s.into_owned(),
            Err(_) => return Err(Malformed::new(raw, "invalid internationalised domain name")),
        }
    };
    // Punycode labels in ASCII input must be valid too (UTS #46 decodes and re-checks them).
    let ascii = if ascii.split('.').any(|l| l.starts_with("xn--")) {
        match idna::domain_to_ascii_cow(ascii.as_bytes(), idna::AsciiDenyList::URL) {
            Ok(s) => s.into_owned(),
            Err(_) => return Err(Malformed::new(raw, "invalid punycode label")),
        }
    } else {
        ascii
    };
    let name = ascii.strip_suffix('.').unwrap_or(&ascii);
    if name.is_empty() {
        return Err(Malformed::new(raw, "empty host"));
    }
    if name.len() > 253 {
        return Err(Malformed::new(raw, "host name longer than 253 bytes"));
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        if label.is_empty() {
            return Err(Malformed::new(raw, "empty label in host name"));
        }
        if label.len() > 63 {
            return Err(Malformed::new(raw, "label longer than 63 bytes"));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
        {
            return Err(Malformed::new(
                raw,
                format!("character {c:?} is not allowed in a host name"),
            ));
        }
    }
    // WHATWG treats a host whose last label is numeric (decimal or 0x-hex) as an IPv4 address and
    // interprets octal, hex, dotless and short forms. forge accepts only the canonical dotted quad.
    let last = labels[labels.len() - 1];
    let numeric_last = last.chars().all(|c| c.is_ascii_digit())
        || (last.starts_with("0x") && last[2..].chars().all(|c| c.is_ascii_hexdigit()));
    if numeric_last {
        return parse_canonical_ipv4(name)
            .map(|v4| NormalHost::Ip(IpAddr::V4(v4)))
            .ok_or_else(|| {
                Malformed::new(
                    raw,
                    "not a canonical IPv4 address (only dotted-quad decimal without leading zeros \
                     is accepted; octal, hex, dotless and short forms are refused)",
                )
            });
    }
    Ok(NormalHost::Name(name.to_string()))
}

/// Four decimal octets 0-255, no leading zeros, nothing else.
pub fn parse_canonical_ipv4(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty() || p.len() > 3 || !p.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        if p.len() > 1 && p.starts_with('0') {
            return None;
        }
        octets[i] = p.parse::<u8>().ok()?;
    }
    Some(Ipv4Addr::from(octets))
}

/// Split an authority (`host`, `host:port`, `[v6]:port`) into raw host and optional port.
/// Userinfo, empty ports, port 0 and non-decimal ports are refused.
pub fn split_authority(authority: &str) -> Result<(&str, Option<u16>), Malformed> {
    if authority.contains('@') {
        return Err(Malformed::new(
            authority,
            "userinfo (`user@`) is not allowed in the authority",
        ));
    }
    let (host, port) = if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => {
                let rest = &authority[end + 1..];
                if rest.is_empty() {
                    (authority, None)
                } else if let Some(p) = rest.strip_prefix(':') {
                    (&authority[..=end], Some(p))
                } else {
                    return Err(Malformed::new(authority, "garbage after IPv6 literal"));
                }
            }
            None => return Err(Malformed::new(authority, "unterminated IPv6 literal")),
        }
    } else {
        match authority.rfind(':') {
            Some(i) => (&authority[..i], Some(&authority[i + 1..])),
            None => (authority, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => Some(parse_port(p).ok_or_else(|| {
            Malformed::new(authority, "port must be a decimal number from 1 to 65535")
        })?),
    };
    Ok((host, port))
}

fn parse_port(p: &str) -> Option<u16> {
    if p.is_empty() || p.len() > 5 || !p.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    match p.parse::<u16>() {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> NormalHost {
        normalize_host(s, true).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn names_are_lowercased_and_lose_one_trailing_dot() {
        assert_eq!(ok("ExAmple.COM."), NormalHost::Name("example.com".into()));
        assert!(normalize_host("example.com..", true).is_err());
    }

    #[test]
    fn idn_becomes_punycode_but_not_on_the_wire() {
        assert_eq!(ok("bücher.de"), NormalHost::Name("xn--bcher-kva.de".into()));
        assert!(normalize_host("bücher.de", false).is_err());
        assert!(normalize_host("xn--zz.de", false).is_err());
    }

    #[test]
    fn fullwidth_digits_map_to_a_canonical_ip_not_a_name() {
        assert_eq!(
            ok("１２７．０．０．１"),
            NormalHost::Ip("127.0.0.1".parse().unwrap())
        );
    }

    #[test]
    fn non_canonical_ipv4_spellings_are_malformed() {
        for s in [
            "127.1",
            "0",
            "8.8.2056",
            "0x7f.1",
            "0x7f000001",
            "2130706433",
            "0177.0.0.1",
            "127.0.0.01",
            "127.0.0.1.1",
            "256.1.1.1",
            "1.2.3.4.",
            "example.123",
        ] {
            if s == "1.2.3.4." {
                // one trailing dot is removed, leaving a canonical literal
                assert_eq!(ok(s), NormalHost::Ip("1.2.3.4".parse().unwrap()));
                continue;
            }
            assert!(normalize_host(s, true).is_err(), "{s} must be malformed");
        }
    }

    #[test]
    fn ipv6_only_in_brackets() {
        assert_eq!(ok("[::1]"), NormalHost::Ip("::1".parse().unwrap()));
        assert!(normalize_host("::1", true).is_err());
        assert!(normalize_host("[fe80::1%25eth0]", true).is_err());
        assert!(normalize_host("[::1", true).is_err());
    }

    #[test]
    fn dangerous_characters_are_refused() {
        for s in [
            "a%2eb",
            "a\0b",
            "a\\b",
            "user@host",
            "a b",
            "a/b",
            "-",
            "a..b",
            ".a",
        ] {
            if s == "-" {
                continue;
            }
            assert!(normalize_host(s, true).is_err(), "{s:?} must be malformed");
        }
        let long_label = "a".repeat(64);
        assert!(normalize_host(&format!("{long_label}.com"), true).is_err());
        let long_name = vec!["abcdefghi"; 30].join(".");
        assert!(normalize_host(&long_name, true).is_err());
    }

    #[test]
    fn authority_splitting() {
        assert_eq!(split_authority("a.com:443").unwrap(), ("a.com", Some(443)));
        assert_eq!(
            split_authority("[::1]:8080").unwrap(),
            ("[::1]", Some(8080))
        );
        assert_eq!(split_authority("a.com").unwrap(), ("a.com", None));
        for bad in [
            "a.com:",
            "a.com:0",
            "a.com:65536",
            "a.com:+80",
            "u@a.com:80",
            "[::1]x",
        ] {
            assert!(split_authority(bad).is_err(), "{bad}");
        }
    }
}
