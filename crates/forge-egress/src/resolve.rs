//! Name resolution behind a trait, so that tests and `--resolve` (like curl's) can answer DNS
//! questions without real DNS.
//!
//! Resolvers only answer; the caller (`connect.rs`) applies the time limit, validates every answer
//! and resolves once per connection.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

/// Answers "which addresses does this name have?".
#[async_trait]
pub trait Resolver: Send + Sync {
    /// All addresses of `host` (a normalised ASCII name, never an IP literal).
    async fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>>;
}

/// The operating system's resolver (getaddrinfo on a blocking thread).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemResolver;

#[async_trait]
impl Resolver for SystemResolver {
    async fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        let mut ips: Vec<IpAddr> = Vec::new();
        for sa in tokio::net::lookup_host((host, 0u16)).await? {
            if !ips.contains(&sa.ip()) {
                ips.push(sa.ip());
            }
        }
        Ok(ips)
    }
}

/// An in-memory map from names to answers. A name may have a sequence of answers (one per lookup,
/// the last repeating) to model DNS rebinding. Names not in the map go to the fallback resolver when
/// one is set (curl's `--resolve` behaviour), else fail with `NotFound`.
#[derive(Default, Clone)]
pub struct StaticResolver {
    answers: HashMap<String, Vec<Vec<IpAddr>>>,
    lookups: Arc<Mutex<HashMap<String, usize>>>,
    fallback: Option<Arc<dyn Resolver>>,
}

impl std::fmt::Debug for StaticResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticResolver")
            .field("answers", &self.answers)
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

impl StaticResolver {
    pub fn new() -> Self {
        Self::default()
    }

    /// Answer `host` with `ips` on every lookup. The name is lowercased, one trailing dot removed.
    pub fn with(mut self, host: &str, ips: impl IntoIterator<Item = IpAddr>) -> Self {
        self.answers
            .insert(key(host), vec![ips.into_iter().collect()]);
        self
    }

    /// Answer the n-th lookup of `host` with `seq[n]` (the last answer repeats).
    pub fn with_sequence(mut self, host: &str, seq: Vec<Vec<IpAddr>>) -> Self {
        self.answers.insert(key(host), seq);
        self
    }

    /// Resolve names not in the map with `fallback`.
    pub fn with_fallback(mut self, fallback: Arc<dyn Resolver>) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// Parse a curl-style `HOST=IP[,IP]` mapping and add it.
    pub fn add_mapping(self, spec: &str) -> Result<Self, String> {
        let (host, ips) = spec
            .split_once('=')
            .ok_or_else(|| format!("--resolve {spec:?}: expected HOST=IP[,IP]"))?;
        let mut list = Vec::new();
        for ip in ips.split(',') {
            let ip = ip.trim().trim_start_matches('[').trim_end_matches(']');
            list.push(ip.parse::<IpAddr>().map_err(|_| {
                format!("--resolve {spec:?}: {ip:?} is not an IP address (expected HOST=IP[,IP])")
            })?);
        }
        if host.is_empty() || list.is_empty() {
            return Err(format!("--resolve {spec:?}: expected HOST=IP[,IP]"));
        }
        Ok(self.with(host, list))
    }

    /// How many times `host` was looked up.
    pub fn lookups(&self, host: &str) -> usize {
        self.lookups
            .lock()
            .map(|m| m.get(&key(host)).copied().unwrap_or(0))
            .unwrap_or(0)
    }
}

fn key(host: &str) -> String {
    let h = host.to_ascii_lowercase();
    h.strip_suffix('.').map(str::to_string).unwrap_or(h)
}

#[async_trait]
impl Resolver for StaticResolver {
    async fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        let k = key(host);
        let n = {
            let mut m = self
                .lookups
                .lock()
                .map_err(|_| io::Error::other("resolver lock poisoned"))?;
            let c = m.entry(k.clone()).or_insert(0);
            *c += 1;
            *c - 1
        };
        match self.answers.get(&k) {
            Some(seq) if !seq.is_empty() => Ok(seq[n.min(seq.len() - 1)].clone()),
            _ => match &self.fallback {
                Some(f) => f.resolve(host).await,
                None => Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{host}: no such host (not in the static resolver map)"),
                )),
            },
        }
    }
}
