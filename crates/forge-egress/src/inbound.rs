//! The rules forge's own HTTP servers (A2A, MCP) apply to inbound requests against DNS rebinding
//! and unauthenticated use: one copy, used by both.
//!
//! - [`host_is_loopback`]: without a token a server trusts only loopback clients, and a web page
//!   can reach a loopback port under a name it controls; so the `Host` header must itself name
//!   loopback (`127.0.0.0/8`, `[::1]`, `localhost`, any port).
//! - [`bearer_matches`]: `Authorization: Bearer <token>`, compared in constant time;
//!   [`cookie_matches`]: the same token in a cookie (the watch page's).
//! - [`origin_is_foreign`]: a browser request from a page of another origin (the watch page
//!   refuses it).

use http::{header, HeaderMap};

/// Whether the request's `Host` names a loopback address or `localhost` (any port). A missing or
/// malformed Host is not loopback.
pub fn host_is_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
    else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((inner, after)) if after.is_empty() || after.starts_with(':') => inner,
            _ => return false,
        },
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether the request carries `Authorization: Bearer <expected>` (scheme case as clients send
/// it: `Bearer` or `bearer`), compared in constant time.
pub fn bearer_matches(headers: &HeaderMap, expected: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .is_some_and(|p| token_matches(p, expected))
}

/// Whether the request carries cookie `name` with the value `expected` (constant time); a
/// browser sends it back to the origin that set it, and only same-site with `SameSite=Strict`.
pub fn cookie_matches(headers: &HeaderMap, name: &str, expected: &str) -> bool {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .any(|(k, v)| k == name && token_matches(v.trim(), expected))
}

/// Whether the request comes from a page of another origin: its `Origin` is not
/// `http(s)://<Host>` (a missing `Origin` is a same-origin GET or a non-browser client), or the
/// browser marked it `Sec-Fetch-Site: cross-site`/`same-site`.
pub fn origin_is_foreign(headers: &HeaderMap) -> bool {
    let fetch_site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    if matches!(fetch_site, Some("cross-site" | "same-site")) {
        return true;
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return false;
    };
    let Some(origin) = origin.to_str().ok().map(str::trim) else {
        return true;
    };
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = host.trim();
    !(origin.eq_ignore_ascii_case(&format!("http://{host}"))
        || origin.eq_ignore_ascii_case(&format!("https://{host}")))
}

/// Constant-time comparison of the presented and expected tokens.
fn token_matches(presented: &str, expected: &str) -> bool {
    let (a, b) = (presented.as_bytes(), expected.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), v.parse().expect("header value"));
        }
        h
    }

    #[test]
    fn host_must_name_loopback() {
        for ok in [
            "127.0.0.1:8080",
            "127.9.9.9",
            "[::1]:3000",
            "[::1]",
            "LOCALHOST:1",
            "localhost",
        ] {
            assert!(host_is_loopback(&headers(&[(header::HOST, ok)])), "{ok}");
        }
        for bad in [
            "evil.example:8080",
            "10.0.0.1",
            "[::1",
            "[::1]x",
            "localhost.evil.example",
            "0x7f000001",
        ] {
            assert!(!host_is_loopback(&headers(&[(header::HOST, bad)])), "{bad}");
        }
        assert!(!host_is_loopback(&HeaderMap::new()), "no Host");
    }

    #[test]
    fn bearer_must_match_exactly() {
        let auth = |v: &str| headers(&[(header::AUTHORIZATION, v)]);
        assert!(bearer_matches(&auth("Bearer s3cret"), "s3cret"));
        assert!(bearer_matches(&auth("bearer s3cret "), "s3cret"));
        assert!(!bearer_matches(&auth("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(&auth("Basic s3cret"), "s3cret"));
        assert!(!bearer_matches(&auth("s3cret"), "s3cret"));
        assert!(!bearer_matches(&HeaderMap::new(), "s3cret"));
    }
}
