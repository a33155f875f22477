//! forge.yaml `browser.profiles`: named login profiles, each bound to the web origins whose
//! cookies and local storage it keeps.
//!
//! ```yaml
//! browser:
//!   profiles:
//!     portal: {origins: ["https://portal.example.com"]}
//! ```
//!
//! A task that names a profile starts its browser context with the profile's cookies and local
//! storage for these origins only, and saves them back at its end (the runtime and the state
//! store do that; this file only reads and checks the configuration). Each origin is
//! `scheme://host[:port]` (http or https), written and compared like a secret's origins.

use serde::{Deserialize, Serialize};

use crate::secrets::{entry_allows, is_valid_secret_name, SecretOrigin};
use crate::yaml::{Doc, Kind, Seg};
use crate::SourceDiagnostic;

/// Most origins one profile may name.
pub const MAX_PROFILE_ORIGINS: usize = 32;

const PROFILE_KEYS: &[&str] = &["origins"];
const EXAMPLE: &str = "profiles: {portal: {origins: [\"https://portal.example.com\"]}}";

/// One `browser.profiles` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileSpec {
    /// The name tasks use (`[a-z][a-z0-9_]*`, at most 64 characters, like a secret's).
    pub name: String,
    /// The origins whose cookies and local storage the profile keeps, normalised
    /// (`https://portal.example.com`, `http://127.0.0.1:8080`), without duplicates.
    pub origins: Vec<String>,
}

impl ProfileSpec {
    /// The origins, parsed (each was checked when forge.yaml was read).
    pub fn parsed_origins(&self) -> Vec<SecretOrigin> {
        self.origins
            .iter()
            .filter_map(|o| SecretOrigin::parse(o).ok())
            .collect()
    }

    /// Every origin of this profile that the egress allowlist `entries` does not reach under
    /// `mode` (as `forge skills audit` and `forge package --prod` report, and the runtime checks
    /// at start). `$VAR` entries cannot be reviewed and reach nothing here.
    pub fn outside_allowlist(&self, mode: crate::EgressMode, entries: &[String]) -> Vec<String> {
        if mode == crate::EgressMode::DevOpen {
            return Vec::new();
        }
        self.parsed_origins()
            .into_iter()
            .filter(|o| {
                !(mode == crate::EgressMode::Allowlist
                    && entries
                        .iter()
                        .any(|e| entry_allows(e, &o.host, Some(o.port))))
            })
            .map(|o| o.to_string())
            .collect()
    }
}

/// Read `browser.profiles` (when present) into profiles and errors.
pub(crate) fn read(doc: &Doc<'_>) -> (Vec<ProfileSpec>, Vec<SourceDiagnostic>) {
    let base = [Seg::Key("browser"), Seg::Key("profiles")];
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let Some(node) = doc.tree.get(&base) else {
        return (out, errors);
    };
    let err = |msg: String, at: &[Seg<'_>], label: &str, help: String| {
        doc.diag("forge::config::profile", msg, at, label, Some(help))
    };
    match &node.kind {
        Kind::Map(_) => {}
        Kind::Scalar(s) if s.trim().is_empty() => return (out, errors),
        _ => {
            errors.push(err(
                "forge.yaml `browser.profiles` must be a mapping of profile names".into(),
                &base,
                "expected a mapping",
                format!("write `{EXAMPLE}` (see docs/browser.md, Logged-in work)"),
            ));
            return (out, errors);
        }
    }
    for (name, _) in node.map_keys() {
        let at = [Seg::Key("browser"), Seg::Key("profiles"), Seg::Key(name)];
        if !is_valid_secret_name(name) {
            errors.push(err(
                format!("browser.profiles: `{name}` is not a profile name"),
                &at,
                "bad name",
                "a profile name is lowercase letters, digits and `_`, starting with a letter, at most 64 characters (`portal`)".into(),
            ));
            continue;
        }
        let Some(entry) = doc.tree.get(&at) else {
            continue;
        };
        let Kind::Map(_) = &entry.kind else {
            errors.push(err(
                format!("browser.profiles.{name} must be a mapping with `origins`"),
                &at,
                "expected a mapping",
                format!("write `{name}: {{origins: [\"https://portal.example.com\"]}}`"),
            ));
            continue;
        };
        for (key, _) in entry.map_keys() {
            if !PROFILE_KEYS.contains(&key) {
                let k = [
                    Seg::Key("browser"),
                    Seg::Key("profiles"),
                    Seg::Key(name),
                    Seg::Key(key),
                ];
                errors.push(err(
                    format!("browser.profiles.{name}: unknown key `{key}`"),
                    &k,
                    "unknown key",
                    "a profile has only `origins`; its cookies and storage are never written in forge.yaml (forge saves them, encrypted, in the state store)".into(),
                ));
            }
        }
        let oat = [
            Seg::Key("browser"),
            Seg::Key("profiles"),
            Seg::Key(name),
            Seg::Key("origins"),
        ];
        let items: Vec<(String, usize)> = match doc.tree.get(&oat).map(|n| &n.kind) {
            Some(Kind::Seq(items)) => {
                let mut v = Vec::new();
                for (i, n) in items.iter().enumerate() {
                    match &n.kind {
                        Kind::Scalar(s) => v.push((s.clone(), i)),
                        _ => errors.push(err(
                            format!("browser.profiles.{name}.origins[{i}] must be a single origin"),
                            &[
                                Seg::Key("browser"),
                                Seg::Key("profiles"),
                                Seg::Key(name),
                                Seg::Key("origins"),
                                Seg::Index(i),
                            ],
                            "expected a string",
                            "write `origins: [\"https://portal.example.com\"]`".into(),
                        )),
                    }
                }
                v
            }
            Some(Kind::Scalar(s)) if !s.trim().is_empty() => vec![(s.clone(), usize::MAX)],
            Some(Kind::Map(_)) | Some(Kind::Other) => {
                errors.push(err(
                    format!("browser.profiles.{name}.origins must be a list"),
                    &oat,
                    "expected a list",
                    "write `origins: [\"https://portal.example.com\"]`".into(),
                ));
                continue;
            }
            _ => Vec::new(),
        };
        if items.is_empty() {
            errors.push(err(
                format!("browser.profiles.{name} has no origins: it would keep nothing"),
                &at,
                "no origins",
                format!(
                    "add `origins: [\"https://...\"]` to `{name}`: the sites whose login it keeps"
                ),
            ));
            continue;
        }
        if items.len() > MAX_PROFILE_ORIGINS {
            errors.push(err(
                format!(
                    "browser.profiles.{name} names {} origins, more than {MAX_PROFILE_ORIGINS}",
                    items.len()
                ),
                &oat,
                "too many origins",
                "split it into several profiles (one per site you log in to)".into(),
            ));
            continue;
        }
        let mut origins: Vec<String> = Vec::new();
        let mut ok = true;
        for (text, i) in &items {
            let mut seg = oat.to_vec();
            if *i != usize::MAX {
                seg.push(Seg::Index(*i));
            }
            match SecretOrigin::parse(text) {
                Ok(o) => {
                    let o = o.to_string();
                    if !origins.contains(&o) {
                        origins.push(o);
                    }
                }
                Err(why) => {
                    ok = false;
                    errors.push(err(
                        format!("browser.profiles.{name}.origins: \"{text}\" is not an origin: {why}"),
                        &seg,
                        "not an origin",
                        "write an origin as `https://portal.example.com` or `http://127.0.0.1:8080` (scheme://host[:port], no path)".into(),
                    ));
                }
            }
        }
        if ok {
            out.push(ProfileSpec {
                name: name.to_string(),
                origins,
            });
        }
    }
    (out, errors)
}

#[cfg(test)]
mod tests {
    use crate::ForgeConfig;

    fn parse(body: &str) -> Result<ForgeConfig, crate::Error> {
        ForgeConfig::parse(
            &format!("agent_id: a\nversion: 0.1.0\n{body}"),
            std::path::Path::new("forge.yaml"),
        )
    }

    fn first_problem(body: &str) -> String {
        let e = parse(body).expect_err("refused");
        e.problems().first().expect("a problem").message.clone()
    }

    #[test]
    fn profiles_parse_with_normalised_origins() {
        let c = parse(
            "browser:\n  profiles:\n    portal: {origins: [\"https://Portal.Example.com/\", \"http://127.0.0.1:8080\", \"https://portal.example.com:443\"]}\n",
        )
        .expect("valid");
        let p = &c.browser.profiles;
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].name, "portal");
        assert_eq!(
            p[0].origins,
            vec!["https://portal.example.com", "http://127.0.0.1:8080"]
        );
    }

    #[test]
    fn bad_profiles_are_diagnostics_naming_the_field() {
        let e =
            first_problem("browser:\n  profiles:\n    portal: {origins: [\"ftp://a.example\"]}\n");
        assert!(e.contains("browser.profiles.portal.origins"), "{e}");
        let e = first_problem(
            "browser:\n  profiles:\n    portal: {origins: [\"https://a.example/login\"]}\n",
        );
        assert!(e.contains("no path"), "{e}");
        let e = first_problem(
            "browser:\n  profiles:\n    Portal: {origins: [\"https://a.example\"]}\n",
        );
        assert!(e.contains("not a profile name"), "{e}");
        let e = first_problem("browser:\n  profiles:\n    portal: {}\n");
        assert!(e.contains("has no origins"), "{e}");
        let e = first_problem(
            "browser:\n  profiles:\n    portal: {origins: [\"https://a.example\"], cookies: x}\n",
        );
        assert!(e.contains("unknown key `cookies`"), "{e}");
    }

    #[test]
    fn origins_outside_the_allowlist_are_named() {
        let c = parse(
            "browser:\n  profiles:\n    portal: {origins: [\"https://portal.example\", \"http://127.0.0.1:8080\"]}\n",
        )
        .expect("valid");
        let p = &c.browser.profiles[0];
        let entries = vec!["portal.example".to_string()];
        assert_eq!(
            p.outside_allowlist(crate::EgressMode::Allowlist, &entries),
            vec!["http://127.0.0.1:8080"]
        );
        let entries = vec!["portal.example".to_string(), "127.0.0.1:8080".to_string()];
        assert!(p
            .outside_allowlist(crate::EgressMode::Allowlist, &entries)
            .is_empty());
        assert_eq!(
            p.outside_allowlist(crate::EgressMode::DenyAll, &entries)
                .len(),
            2
        );
    }
}
