//! Durations in forge.yaml and SKILL.md: the one grammar ([`parse_duration`], Go-style `60s`,
//! `2m`, `1m30s`, `1.5s`, `500ms`, `1h`; also `+5s`, `5 s`, `1e3ms`, which tools[].config
//! accepted before the grammars were one) and its shortest spelling ([`format_duration`]).
//! A tool's config also takes a bare number of seconds: [`crate::parse_duration_value`].

use std::time::Duration;

/// Parse a Go-style duration (`60s`, `2m`, `1m30s`, `1.5s`, `500ms`, `1h`).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return Err(format!("\"{s}\" has no unit"));
    }
    let mut total = 0f64;
    // A leading `+` is allowed (`+5s`), as Rust's and Go's number syntax allow it.
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    if rest.is_empty() {
        return Err(format!("\"{s}\" is not a duration"));
    }
    let mut parts = 0;
    while !rest.is_empty() {
        parts += 1;
        if parts > 8 {
            return Err(format!("\"{s}\" has too many parts"));
        }
        let num_len = number_len(rest);
        if num_len == 0 {
            return Err(format!("\"{s}\" is not a duration"));
        }
        let n: f64 = rest[..num_len]
            .parse()
            .map_err(|_| format!("\"{}\" is not a number", &rest[..num_len]))?;
        // Spaces may separate a number from its unit (`5 s`).
        rest = rest[num_len..].trim_start();
        let unit_len = rest.bytes().take_while(|c| c.is_ascii_alphabetic()).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let secs = match unit {
            "ms" => n / 1000.0,
            "s" => n,
            "m" => n * 60.0,
            "h" => n * 3600.0,
            "" => return Err(format!("\"{s}\" has a number without a unit")),
            other => return Err(format!("unknown unit \"{other}\" in \"{s}\"")),
        };
        total += secs;
        if total > 1e9 {
            return Err(format!("\"{s}\" is far too long"));
        }
    }
    Ok(Duration::from_secs_f64(total))
}

/// The length of the number at the start of `text`: digits and `.`, then an optional exponent
/// (`e`/`E`, an optional sign, digits: `1e3s`, `5e-1s`). No unit begins with `e`, so an exponent
/// is never mistaken for one.
fn number_len(text: &str) -> usize {
    let b = text.as_bytes();
    let mut n = b
        .iter()
        .take_while(|c| c.is_ascii_digit() || **c == b'.')
        .count();
    if n > 0 && matches!(b.get(n), Some(b'e' | b'E')) {
        let mut m = n + 1;
        if matches!(b.get(m), Some(b'+' | b'-')) {
            m += 1;
        }
        let digits = b[m.min(b.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits > 0 {
            n = m + digits;
        }
    }
    n
}

/// `60s`, `1500ms`: the shortest exact spelling.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// Serde as duration text (`60s`, `1500ms`), for `#[serde(with = ...)]`.
pub(crate) mod text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_duration(*d))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("60").is_err());
        assert!(parse_duration("60x").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("").is_err());
        // Spellings the cli_execute config grammar accepted before the grammars were one.
        assert_eq!(parse_duration("+5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("5 s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("1e3ms"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("5e-1s"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("1e").is_err());
        assert!(parse_duration("+").is_err());
        assert!(parse_duration("1m 30s").is_err());
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_secs(60)), "60s");
    }
}
