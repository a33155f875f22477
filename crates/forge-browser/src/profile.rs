//! Login profiles in the browser: what a session's context starts with and what is read back
//! from it at its end, for the profile's origins only.
//!
//! - [`ProfileState`]: cookies ([`SavedCookie`], forge's own shape, independent of the CDP
//!   version) and local storage per origin, as the runtime seals it.
//! - [`ProfileOrigin`]: `scheme://host[:port]`, compared on scheme, host and port.
//! - [`ProfileState::only`]: the filter both ways. A cookie belongs to an origin when its domain
//!   matches the origin's host (a host-only cookie: the same host; a domain cookie `.d`: `d` or a
//!   subdomain of it) **and** it was set by that origin's scheme and port (Chromium records each
//!   cookie's source scheme and port; cookies are otherwise shared by every port of a host, so
//!   without this a cookie of `http://127.0.0.1:9000` would pass as one of `:8000`). A cookie
//!   whose source is unknown is dropped. Local storage is keyed by origin already.
//! - Restore (`restore`, called when the session's context is created): `Storage.setCookies` on
//!   the context, and one script added to the first tab for new documents that fills the saved
//!   local storage keys a document of a profile origin does not have yet.
//! - Read (`read`, before the session closes): `Storage.getCookies` on the context, filtered;
//!   the local storage of each tab showing a profile origin (`read_storage`; the runtime also
//!   reads it after each browser call of a profile task, so an origin the task left still has
//!   the storage it last had; an origin never shown keeps its earlier saved storage).

use std::collections::BTreeMap;
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::browser::BrowserContextId;
use chromiumoxide::cdp::browser_protocol::network::{
    CookieParam, CookieSameSite, CookieSourceScheme, TimeSinceEpoch,
};
use chromiumoxide::cdp::browser_protocol::page::AddScriptToEvaluateOnNewDocumentParams;
use chromiumoxide::cdp::browser_protocol::storage::{GetCookiesParams, SetCookiesParams};
use chromiumoxide::{Browser, Page};
use serde::{Deserialize, Serialize};

use crate::error::BrowserError;
use crate::session::with_timeout;

/// Most bytes of local storage kept per origin (the rest of an origin's storage is not saved).
pub const MAX_STORAGE_BYTES_PER_ORIGIN: usize = 1 << 20;

/// A web origin a profile keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileOrigin {
    /// `http` or `https`.
    pub scheme: String,
    /// Lowercase host.
    pub host: String,
    /// The port (the scheme's default when not written).
    pub port: u16,
}

impl ProfileOrigin {
    /// Parse `scheme://host[:port]` (what forge.yaml `browser.profiles` normalised).
    pub fn parse(text: &str) -> Option<ProfileOrigin> {
        let u = url::Url::parse(text).ok()?;
        if !matches!(u.scheme(), "http" | "https") {
            return None;
        }
        Some(ProfileOrigin {
            scheme: u.scheme().to_string(),
            host: u.host_str()?.trim_matches(['[', ']']).to_ascii_lowercase(),
            port: u.port_or_known_default()?,
        })
    }

    /// As written in local storage keys and messages: `scheme://host[:port]` as browsers write
    /// `location.origin` (no default port).
    pub fn web_origin(&self) -> String {
        let default = matches!(
            (self.scheme.as_str(), self.port),
            ("http", 80) | ("https", 443)
        );
        let host = match self.host.contains(':') {
            true => format!("[{}]", self.host),
            false => self.host.clone(),
        };
        match default {
            true => format!("{}://{host}", self.scheme),
            false => format!("{}://{host}:{}", self.scheme, self.port),
        }
    }
}

/// One cookie as a profile keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedCookie {
    pub name: String,
    pub value: String,
    /// As Chromium reports it: `host` for a host-only cookie, `.domain` for a domain cookie.
    pub domain: String,
    pub path: String,
    /// Seconds since the epoch; `None` for a session cookie.
    pub expires: Option<f64>,
    pub http_only: bool,
    pub secure: bool,
    /// `Strict`, `Lax`, `None`, when set.
    pub same_site: Option<String>,
    /// `https` or `http`: the scheme of the page or response that set it.
    pub source_scheme: String,
    /// The port it was set from.
    pub source_port: u16,
}

impl SavedCookie {
    /// Whether this cookie belongs to `o` (see the module comment).
    pub fn belongs_to(&self, o: &ProfileOrigin) -> bool {
        let host_ok = match self.domain.strip_prefix('.') {
            Some(d) => {
                let d = d.to_ascii_lowercase();
                o.host == d || o.host.ends_with(&format!(".{d}"))
            }
            None => self.domain.eq_ignore_ascii_case(&o.host),
        };
        host_ok && self.source_scheme == o.scheme && self.source_port == o.port
    }
}

/// What a profile holds: cookies and local storage (origin → key/value pairs, in order).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProfileState {
    pub cookies: Vec<SavedCookie>,
    pub local_storage: BTreeMap<String, Vec<(String, String)>>,
}

impl ProfileState {
    /// Only what belongs to `origins`: the filter applied on restore and on save.
    pub fn only(mut self, origins: &[ProfileOrigin]) -> ProfileState {
        self.cookies
            .retain(|c| origins.iter().any(|o| c.belongs_to(o)));
        let keep: Vec<String> = origins.iter().map(ProfileOrigin::web_origin).collect();
        self.local_storage.retain(|k, _| keep.contains(k));
        self
    }

    /// Every value this state holds (cookie and storage values), for checks that none leaks.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.cookies.iter().map(|c| c.value.as_str()).chain(
            self.local_storage
                .values()
                .flat_map(|v| v.iter().map(|(_, v)| v.as_str())),
        )
    }
}

/// What a session's context starts with: the profile's origins and its state.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionProfile {
    /// The profile's name (for messages).
    pub name: String,
    /// Its origins.
    pub origins: Vec<ProfileOrigin>,
    /// What it restores (filtered to `origins` again before use).
    pub state: ProfileState,
}

fn to_param(c: &SavedCookie) -> CookieParam {
    let mut p = CookieParam::new(c.name.clone(), c.value.clone());
    if c.domain.starts_with('.') {
        p.domain = Some(c.domain.clone());
    } else {
        // A host-only cookie is set by URL (a `domain` would make it a domain cookie).
        let host = match c.domain.contains(':') {
            true => format!("[{}]", c.domain),
            false => c.domain.clone(),
        };
        p.url = Some(format!(
            "{}://{host}:{}{}",
            c.source_scheme, c.source_port, c.path
        ));
    }
    p.path = Some(c.path.clone());
    p.secure = Some(c.secure);
    p.http_only = Some(c.http_only);
    p.expires = c.expires.map(TimeSinceEpoch::new);
    p.same_site = match c.same_site.as_deref() {
        Some("Strict") => Some(CookieSameSite::Strict),
        Some("Lax") => Some(CookieSameSite::Lax),
        Some("None") => Some(CookieSameSite::None),
        _ => None,
    };
    p.source_scheme = Some(match c.source_scheme.as_str() {
        "https" => CookieSourceScheme::Secure,
        _ => CookieSourceScheme::NonSecure,
    });
    p.source_port = Some(i64::from(c.source_port));
    p
}

/// The script that fills a document's missing local storage keys from `state` (only on the
/// profile's origins; the data of other origins is never in it).
fn storage_script(state: &ProfileState) -> Option<String> {
    if state.local_storage.values().all(Vec::is_empty) {
        return None;
    }
    let data = serde_json::to_string(&state.local_storage).ok()?;
    Some(format!(
        "(() => {{ const d = {data}; const items = d[location.origin]; if (!items) return; \
         try {{ for (const [k, v] of items) {{ if (localStorage.getItem(k) === null) localStorage.setItem(k, v); }} }} catch (e) {{}} }})();"
    ))
}

/// Start context `ctx` (whose first tab is `page`) with `profile`'s cookies and local storage.
pub(crate) async fn restore(
    browser: &Browser,
    ctx: &BrowserContextId,
    page: &Page,
    profile: &SessionProfile,
) -> Result<(), BrowserError> {
    let state = profile.state.clone().only(&profile.origins);
    if !state.cookies.is_empty() {
        let mut params = SetCookiesParams::new(state.cookies.iter().map(to_param).collect());
        params.browser_context_id = Some(ctx.clone());
        with_timeout(Duration::from_secs(10), browser.execute(params))
            .await
            .map_err(|e| {
                BrowserError::Cdp(format!(
                    "cannot restore the cookies of profile {}: {e}",
                    profile.name
                ))
            })?;
    }
    if let Some(script) = storage_script(&state) {
        with_timeout(
            Duration::from_secs(10),
            page.execute(AddScriptToEvaluateOnNewDocumentParams::new(script)),
        )
        .await?;
    }
    Ok(())
}

fn from_cdp(c: chromiumoxide::cdp::browser_protocol::network::Cookie) -> Option<SavedCookie> {
    let source_scheme = match c.source_scheme {
        CookieSourceScheme::Secure => "https",
        CookieSourceScheme::NonSecure => "http",
        _ => return None,
    };
    Some(SavedCookie {
        name: c.name,
        value: c.value,
        domain: c.domain,
        path: c.path,
        expires: (!c.session && c.expires > 0.0).then_some(c.expires),
        http_only: c.http_only,
        secure: c.secure,
        same_site: c.same_site.map(|s| s.as_ref().to_string()),
        source_scheme: source_scheme.to_string(),
        source_port: u16::try_from(c.source_port).ok()?,
    })
}

/// Read context `ctx`'s cookies and the local storage of `pages` (the session's tabs), keeping
/// only what belongs to `origins`.
pub(crate) async fn read(
    browser: &Browser,
    ctx: &BrowserContextId,
    pages: &[Page],
    origins: &[ProfileOrigin],
) -> Result<ProfileState, BrowserError> {
    let params = GetCookiesParams {
        browser_context_id: Some(ctx.clone()),
    };
    let got = with_timeout(Duration::from_secs(10), browser.execute(params)).await?;
    let cookies = got
        .result
        .cookies
        .into_iter()
        .filter_map(from_cdp)
        .collect();
    let local_storage = read_storage(pages, origins).await;
    Ok(ProfileState {
        cookies,
        local_storage,
    }
    .only(origins))
}

/// The local storage of each of `pages` that shows one of `origins` (by the browser's record of
/// its URL, not page script), at most [`MAX_STORAGE_BYTES_PER_ORIGIN`] per origin.
pub(crate) async fn read_storage(
    pages: &[Page],
    origins: &[ProfileOrigin],
) -> BTreeMap<String, Vec<(String, String)>> {
    let mut local_storage = BTreeMap::new();
    let wanted: Vec<String> = origins.iter().map(ProfileOrigin::web_origin).collect();
    for page in pages {
        // Which origin the tab shows, from the browser's record of its URL (not page script).
        let Ok(Ok(Some(url))) = tokio::time::timeout(Duration::from_secs(5), page.url()).await
        else {
            continue;
        };
        let Some(origin) = ProfileOrigin::parse(&url).map(|o| o.web_origin()) else {
            continue;
        };
        if !wanted.contains(&origin) || local_storage.contains_key(&origin) {
            continue;
        }
        let Ok(Ok(v)) = tokio::time::timeout(
            Duration::from_secs(5),
            page.evaluate(
                "(() => { const out = []; let n = 0; for (let i = 0; i < localStorage.length; i++) { const k = localStorage.key(i); const v = localStorage.getItem(k); n += k.length + v.length; if (n > 1048576) break; out.push([k, v]); } return JSON.stringify(out); })()",
            ),
        )
        .await
        else {
            continue;
        };
        let Ok(text) = v.into_value::<String>() else {
            continue;
        };
        if text.len() > MAX_STORAGE_BYTES_PER_ORIGIN * 2 {
            continue;
        }
        if let Ok(items) = serde_json::from_str::<Vec<(String, String)>>(&text) {
            local_storage.insert(origin, items);
        }
    }
    local_storage
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cookie(domain: &str, scheme: &str, port: u16) -> SavedCookie {
        SavedCookie {
            name: "sid".into(),
            value: "v".into(),
            domain: domain.into(),
            path: "/".into(),
            expires: None,
            http_only: true,
            secure: false,
            same_site: None,
            source_scheme: scheme.into(),
            source_port: port,
        }
    }

    #[test]
    fn cookies_belong_by_domain_rule_scheme_and_port() {
        let o = ProfileOrigin::parse("http://127.0.0.1:8000").expect("origin");
        assert!(cookie("127.0.0.1", "http", 8000).belongs_to(&o));
        // The same host on another port, or over the other scheme: another origin.
        assert!(!cookie("127.0.0.1", "http", 9000).belongs_to(&o));
        assert!(!cookie("127.0.0.1", "https", 8000).belongs_to(&o));
        assert!(!cookie("127.0.0.2", "http", 8000).belongs_to(&o));
        let p = ProfileOrigin::parse("https://portal.example.com").expect("origin");
        assert!(cookie(".example.com", "https", 443).belongs_to(&p));
        assert!(cookie(".portal.example.com", "https", 443).belongs_to(&p));
        assert!(!cookie(".other.example.com", "https", 443).belongs_to(&p));
        assert!(
            !cookie("example.com", "https", 443).belongs_to(&p),
            "host-only elsewhere"
        );
        assert!(
            !cookie(".ample.com", "https", 443).belongs_to(&p),
            "suffix is not a domain"
        );
    }

    #[test]
    fn only_keeps_the_profile_origins() {
        let o = ProfileOrigin::parse("http://127.0.0.1:8000").expect("origin");
        let mut s = ProfileState {
            cookies: vec![
                cookie("127.0.0.1", "http", 8000),
                cookie("127.0.0.1", "http", 9000),
            ],
            local_storage: BTreeMap::new(),
        };
        s.local_storage.insert(
            "http://127.0.0.1:8000".into(),
            vec![("k".into(), "v".into())],
        );
        s.local_storage.insert(
            "http://127.0.0.1:9000".into(),
            vec![("k".into(), "x".into())],
        );
        let s = s.only(std::slice::from_ref(&o));
        assert_eq!(s.cookies.len(), 1);
        assert_eq!(s.cookies[0].source_port, 8000);
        assert_eq!(
            s.local_storage.keys().collect::<Vec<_>>(),
            vec!["http://127.0.0.1:8000"]
        );
        assert_eq!(
            ProfileOrigin::parse("https://a.example:443")
                .expect("o")
                .web_origin(),
            "https://a.example"
        );
    }
}
