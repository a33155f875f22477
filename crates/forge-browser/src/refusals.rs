//! [`RefusalLog`]: the egress proxy's recent refusals, so a blocked navigation is reported with
//! the proxy's own reason instead of Chromium's generic tunnel error.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use forge_egress::EgressRefusal;

/// How many refusals are kept.
const KEEP: usize = 256;

/// A shared, bounded log of recent egress refusals (host and the typed refusal). Cheap to clone.
///
/// Wire it as the proxy's observer (`ProxyOptions { observer: Some(Arc::new(log.clone())), .. }`)
/// and hand the same log to [`crate::BrowserManager::with_refusals`].
#[derive(Clone, Default)]
pub struct RefusalLog {
    inner: Arc<Mutex<VecDeque<(Instant, String, EgressRefusal)>>>,
}

impl RefusalLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record that a request to `host` was refused with `refusal`.
    pub fn record(&self, host: &str, refusal: &EgressRefusal) {
        let mut q = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= KEEP {
            q.pop_front();
        }
        q.push_back((Instant::now(), host.to_ascii_lowercase(), refusal.clone()));
    }

    /// The latest refusal of `host` within `within`, if any. Hosts match by their canonical form:
    /// the same name in any case, or the same IP address however it is spelt (the proxy logs
    /// `[::ffff:127.0.0.1]` where Chromium's page URL says `[::ffff:7f00:1]`); a logged entry may
    /// carry a port.
    pub fn recent(&self, host: &str, within: Duration) -> Option<EgressRefusal> {
        let want = canonical(host);
        let q = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        q.iter()
            .rev()
            .take_while(|(t, _, _)| t.elapsed() <= within)
            .find(|(_, h, _)| {
                canonical(h) == want || split_port(h).is_some_and(|bare| canonical(bare) == want)
            })
            .map(|(_, _, r)| r.clone())
    }

    /// Hosts refused within `within`, oldest first, deduplicated.
    pub fn hosts_since(&self, since: Instant) -> Vec<String> {
        let q = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<String> = Vec::new();
        for (t, h, _) in q.iter() {
            if *t >= since && !out.contains(h) {
                out.push(h.clone());
            }
        }
        out
    }
}

/// `host` without brackets, lowercase; an IP address in its one canonical spelling.
fn canonical(host: &str) -> String {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => bare.to_ascii_lowercase(),
    }
}

/// `host:port` or `[v6]:port` without its port; `None` when `h` names no port.
fn split_port(h: &str) -> Option<&str> {
    let (host, port) = h.rsplit_once(':')?;
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // A bare IPv6 address has colons of its own: only a bracketed one carries a port.
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return None;
    }
    Some(host)
}

impl forge_egress::proxy::EgressObserver for RefusalLog {
    fn on_decision(&self, d: &forge_egress::proxy::Decision) {
        if d.outcome == forge_egress::proxy::Outcome::Blocked {
            if let Some(r) = d.reason.refusal() {
                self.record(&d.host, r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_recent_refusals_by_host_with_or_without_port() {
        let log = RefusalLog::new();
        let t0 = Instant::now();
        let evil = EgressRefusal::MetadataHost {
            host: "evil.example".into(),
        };
        let port = EgressRefusal::Port {
            host: "127.0.0.1".into(),
            port: 9,
        };
        log.record("Evil.example:443", &evil);
        log.record("127.0.0.1:9", &port);
        assert_eq!(
            log.recent("evil.example", Duration::from_secs(5)),
            Some(evil)
        );
        assert_eq!(log.recent("127.0.0.1", Duration::from_secs(5)), Some(port));
        assert_eq!(log.recent("other.example", Duration::from_secs(5)), None);
        assert_eq!(
            log.hosts_since(t0),
            vec!["evil.example:443".to_string(), "127.0.0.1:9".to_string()]
        );
        // One address, other spellings: an IPv4-mapped IPv6 literal as the proxy logs it and as a
        // page URL spells it.
        let mapped = EgressRefusal::Port {
            host: "::ffff:127.0.0.1".into(),
            port: 8,
        };
        log.record("[::ffff:127.0.0.1]:8", &mapped);
        assert_eq!(
            log.recent("[::ffff:7f00:1]", Duration::from_secs(5)),
            Some(mapped.clone())
        );
        assert_eq!(
            log.recent("::FFFF:7F00:1", Duration::from_secs(5)),
            Some(mapped)
        );
        assert_eq!(log.recent("::ffff:7f00:2", Duration::from_secs(5)), None);
    }
}
