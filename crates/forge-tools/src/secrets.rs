//! Resolved secrets: values held in memory that never print, bound to where they may be used,
//! and the one redactor that replaces every value with its name in whatever forge emits.
//!
//! The runtime reads forge.yaml `secrets:` (forge-skills), resolves each reference once at start
//! into a [`Secret`] and hands tools the set as [`Secrets`] in their [`crate::ToolContext`].
//! Invariants, each tested below by name:
//! - a [`SecretValue`] prints as `(secret)` in `Debug`; it has no `Display`, and its memory is
//!   zeroed on drop (`zeroize`) — `secret_value_debug_never_shows_the_value`;
//! - [`Secrets::redact`] replaces every value, longest first, with `(secret NAME)` —
//!   `redact_replaces_every_value_with_its_name`;
//! - a value is released for an origin only when that exact (scheme, host, port) is bound —
//!   `origin_binding_is_exact_on_scheme_host_and_port`.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;
use zeroize::Zeroizing;

/// A secret's value. No `Display`; `Debug` prints `(secret)`; zeroed on drop.
pub struct SecretValue(Zeroizing<String>);

impl SecretValue {
    pub fn new(value: String) -> Self {
        Self(Zeroizing::new(value))
    }
    /// The value, for the one place that uses it (typing it, or a header being sent).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("(secret)")
    }
}

/// A web origin a secret is bound to (scheme, lowercase host, port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundOrigin {
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for BoundOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}:{}", self.scheme, self.host, self.port)
    }
}

impl BoundOrigin {
    /// The origin of `url` (`None` for opaque origins such as `about:blank` or `data:`).
    pub fn of_url(url: &str) -> Option<BoundOrigin> {
        let u = url::Url::parse(url).ok()?;
        let scheme = u.scheme().to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return None;
        }
        let host = u.host_str()?.trim_end_matches('.').to_ascii_lowercase();
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        Some(BoundOrigin {
            port: u.port_or_known_default()?,
            scheme,
            host,
        })
    }
}

/// One resolved secret: its name, value and bindings. `Debug` shows the name and bindings only.
#[derive(Debug)]
pub struct Secret {
    pub name: String,
    pub value: SecretValue,
    /// Origins where `browser_fill` may type it (the field's own frame origin).
    pub origins: Vec<BoundOrigin>,
    /// Hosts (`host` or `host:port`, lowercase, IPv6 in brackets) where `http_request` may send it.
    pub hosts: Vec<String>,
}

impl Secret {
    /// Whether the value may be typed into a field whose frame origin is `o`.
    pub fn allows_origin(&self, o: &BoundOrigin) -> bool {
        self.origins.iter().any(|b| b == o)
    }

    /// Whether the value may be sent in a request to `o` (a `hosts` entry naming its host, with or
    /// without its port, or a bound origin).
    pub fn allows_request_to(&self, o: &BoundOrigin) -> bool {
        let host = match o.host.contains(':') {
            true => format!("[{}]", o.host),
            false => o.host.clone(),
        };
        let with_port = format!("{host}:{}", o.port);
        self.allows_origin(o) || self.hosts.iter().any(|h| *h == host || *h == with_port)
    }

    /// Where it may be used, for messages and the model (`https://a.example:443, api.b.example`).
    pub fn bindings(&self) -> String {
        let mut v: Vec<String> = self.origins.iter().map(|o| o.to_string()).collect();
        v.extend(self.hosts.iter().cloned());
        v.join(", ")
    }
}

/// The shortest start of a secret value that [`Secrets::redact_cut`] treats as the value cut in
/// two: shorter tails are too likely to be ordinary text ending with the same letters.
pub const CUT_PREFIX: usize = 3;

/// Who is told when a secret is used (the runtime's audit log): name, origin, tool.
pub trait SecretUseSink: Send + Sync {
    fn used(&self, task_id: Option<&str>, name: &str, origin: &str, tool: &str);
}

/// The agent's resolved secrets. Cheap to clone (an `Arc` inside).
#[derive(Clone, Default)]
pub struct Secrets {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    list: Vec<Secret>,
    /// Indices into `list`, longest value first, so a value containing another is replaced whole.
    by_len: Vec<usize>,
    sink: Option<Arc<dyn SecretUseSink>>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.inner.list.iter().map(|s| &s.name))
            .finish()
    }
}

impl Secrets {
    /// The set `list`, reporting each use to `sink`. Empty values are dropped (the runtime refuses
    /// them at start).
    pub fn new(list: Vec<Secret>, sink: Option<Arc<dyn SecretUseSink>>) -> Self {
        let list: Vec<Secret> = list
            .into_iter()
            .filter(|s| !s.value.expose().is_empty())
            .collect();
        let mut by_len: Vec<usize> = (0..list.len()).collect();
        by_len.sort_by_key(|&i| std::cmp::Reverse(list[i].value.expose().len()));
        Self {
            inner: Arc::new(Inner { list, by_len, sink }),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.inner.list.is_empty()
    }

    /// The secret named `name`.
    pub fn get(&self, name: &str) -> Option<&Secret> {
        self.inner.list.iter().find(|s| s.name == name)
    }

    /// Every secret, in forge.yaml order.
    pub fn iter(&self) -> impl Iterator<Item = &Secret> {
        self.inner.list.iter()
    }

    /// The names, comma-separated (for "unknown secret" messages).
    pub fn names(&self) -> String {
        let v: Vec<&str> = self.inner.list.iter().map(|s| s.name.as_str()).collect();
        match v.is_empty() {
            true => "(none: this agent's forge.yaml has no `secrets:`)".to_string(),
            false => v.join(", "),
        }
    }

    /// Record that `name` was used on `origin` by `tool`.
    pub fn record_use(&self, task_id: Option<&str>, name: &str, origin: &str, tool: &str) {
        if let Some(s) = &self.inner.sink {
            s.used(task_id, name, origin, tool);
        }
    }

    /// `text` with every secret value replaced by `(secret NAME)`.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let mut out = Cow::Borrowed(text);
        for &i in &self.inner.by_len {
            let s = &self.inner.list[i];
            let v = s.value.expose();
            if out.contains(v) {
                out = Cow::Owned(out.replace(v, &format!("(secret {})", s.name)));
            }
        }
        out
    }

    /// `text` that was cut at a length limit, redacted: every whole value as in [`Self::redact`],
    /// and also a value cut in two by the limit (`text` ends with the first [`CUT_PREFIX`] or
    /// more characters of a value), whose start is replaced by `(secret NAME, cut)`. A tool that
    /// cuts text should redact before cutting; this is for text cut where it is read (an HTTP
    /// body read up to its byte cap).
    pub fn redact_cut<'t>(&self, text: &'t str) -> Cow<'t, str> {
        let out = self.redact(text);
        for &i in &self.inner.by_len {
            let s = &self.inner.list[i];
            let v = s.value.expose();
            // Proper prefixes of the value, longest first, on character boundaries.
            let cut = v
                .char_indices()
                .map(|(at, _)| at)
                .skip(CUT_PREFIX)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .find(|&at| out.ends_with(&v[..at]));
            if let Some(at) = cut {
                let keep = out.len() - at;
                return Cow::Owned(format!("{}(secret {}, cut)", &out[..keep], s.name));
            }
        }
        out
    }

    /// Redact every string inside `v` (keys included).
    pub fn redact_json(&self, v: &mut Value) {
        if self.is_empty() {
            return;
        }
        match v {
            Value::String(s) => {
                if let Cow::Owned(r) = self.redact(s) {
                    *s = r;
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.redact_json(x)),
            Value::Object(m) => {
                let old = std::mem::take(m);
                for (k, mut x) in old {
                    self.redact_json(&mut x);
                    m.insert(self.redact(&k).into_owned(), x);
                }
            }
            _ => {}
        }
    }

    /// The name of the secret whose value is exactly `text`, if any (a field holding a secret).
    pub fn name_of_value(&self, text: &str) -> Option<&str> {
        self.inner
            .list
            .iter()
            .find(|s| s.value.expose() == text)
            .map(|s| s.name.as_str())
    }

    /// The lines a model is told: each name and where it may be used, never a value.
    pub fn prompt_lines(&self) -> String {
        let mut out = String::new();
        for s in &self.inner.list {
            let mut parts = Vec::new();
            if !s.origins.is_empty() {
                let o: Vec<String> = s.origins.iter().map(|o| o.to_string()).collect();
                parts.push(format!("browser_fill on {}", o.join(", ")));
            }
            let mut hosts: Vec<String> = s.hosts.clone();
            hosts.extend(s.origins.iter().map(|o| o.to_string()));
            parts.push(format!("http_request headers to {}", hosts.join(", ")));
            out.push_str(&format!("- {}: {}\n", s.name, parts.join("; ")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(name: &str, value: &str, origins: &[&str], hosts: &[&str]) -> Secret {
        Secret {
            name: name.into(),
            value: SecretValue::new(value.into()),
            origins: origins
                .iter()
                .map(|u| BoundOrigin::of_url(u).expect("origin"))
                .collect(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
        }
    }

    #[test]
    fn secret_value_debug_never_shows_the_value() {
        let s = secret("pw", "hunter2-xyz", &["https://a.example"], &[]);
        let one = format!("{s:?}");
        let shown = format!("{one} {:?}", Secrets::new(vec![s], None));
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("pw"), "{shown}");
    }

    #[test]
    fn redact_cut_hides_a_value_cut_in_two_at_the_end() {
        let secrets = Secrets::new(
            vec![secret("pw", "hunter2-long", &["https://a.example"], &[])],
            None,
        );
        assert_eq!(secrets.redact_cut("x hunter2-lo"), "x (secret pw, cut)");
        assert_eq!(secrets.redact_cut("a hunter2-long b"), "a (secret pw) b");
        // Shorter than CUT_PREFIX: ordinary text.
        assert_eq!(secrets.redact_cut("the hu"), "the hu");
        assert_eq!(secrets.redact_cut("the hun"), "the (secret pw, cut)");
    }

    #[test]
    fn redact_replaces_every_value_with_its_name() {
        let set = Secrets::new(
            vec![
                secret("short", "abc", &["https://a.example"], &[]),
                secret("long", "abcdef", &["https://a.example"], &[]),
            ],
            None,
        );
        assert_eq!(
            set.redact("x abcdef y abc"),
            "x (secret long) y (secret short)"
        );
        let mut v = serde_json::json!({"k": ["abc", {"abcdef": 1}]});
        set.redact_json(&mut v);
        assert!(!v.to_string().contains("abc\""), "{v}");
    }

    #[test]
    fn origin_binding_is_exact_on_scheme_host_and_port() {
        let s = secret("pw", "v", &["http://127.0.0.1:8080"], &["api.example"]);
        let o = |u: &str| BoundOrigin::of_url(u).expect("origin");
        assert!(s.allows_origin(&o("http://127.0.0.1:8080/login")));
        assert!(!s.allows_origin(&o("http://127.0.0.1:8081/")));
        assert!(!s.allows_origin(&o("https://127.0.0.1:8080/")));
        assert!(!s.allows_origin(&o("http://localhost:8080/")));
        assert!(s.allows_request_to(&o("https://api.example/x")));
        assert!(s.allows_request_to(&o("http://api.example:9999/x")));
        assert!(!s.allows_request_to(&o("https://evil.example/")));
        assert!(BoundOrigin::of_url("about:blank").is_none());
    }
}
