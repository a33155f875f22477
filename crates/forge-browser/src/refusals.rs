//! [`RefusalLog`]: the egress proxy's recent refusals, so a blocked navigation is reported with
//! the proxy's own reason instead of Chromium's generic tunnel error.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How many refusals are kept.
const KEEP: usize = 256;

/// A shared, bounded log of recent egress refusals (host and reason). Cheap to clone.
///
/// Wire it as the proxy's observer (`ProxyOptions { observer: Some(Arc::new(log.clone())), .. }`)
/// and hand the same log to [`crate::BrowserManager::with_refusals`].
#[derive(Clone, Default)]
pub struct RefusalLog {
    inner: Arc<Mutex<VecDeque<(Instant, String, String)>>>,
}

impl RefusalLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record that a request to `host` was refused for `reason`.
    pub fn record(&self, host: &str, reason: &str) {
        let mut q = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= KEEP {
            q.pop_front();
        }
        q.push_back((
            Instant::now(),
            host.to_ascii_lowercase(),
            reason.to_string(),
        ));
    }

    /// The latest reason `host` was refused within `within`, if any.
    pub fn recent(&self, host: &str, within: Duration) -> Option<String> {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let q = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        q.iter()
            .rev()
            .take_while(|(t, _, _)| t.elapsed() <= within)
            .find(|(_, h, _)| {
                let h = h.trim_start_matches('[').trim_end_matches(']');
                h == host
                    || h.rsplit_once(':')
                        .map(|(hh, _)| hh.trim_end_matches(']').trim_start_matches('['))
                        == Some(host.as_str())
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

impl forge_egress::proxy::EgressObserver for RefusalLog {
    fn on_decision(&self, d: &forge_egress::proxy::Decision) {
        if d.outcome == forge_egress::proxy::Outcome::Blocked {
            self.record(&d.host, &d.reason);
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
        log.record(
            "Evil.example:443",
            "evil.example is not in this agent's allowlist",
        );
        log.record("127.0.0.1:9", "port 9 is not allowed");
        assert_eq!(
            log.recent("evil.example", Duration::from_secs(5))
                .as_deref(),
            Some("evil.example is not in this agent's allowlist")
        );
        assert_eq!(
            log.recent("127.0.0.1", Duration::from_secs(5)).as_deref(),
            Some("port 9 is not allowed")
        );
        assert_eq!(log.recent("other.example", Duration::from_secs(5)), None);
        assert_eq!(
            log.hosts_since(t0),
            vec!["evil.example:443".to_string(), "127.0.0.1:9".to_string()]
        );
    }
}
