//! `forge package --prod`: configurations that must not reach production. Each problem names the
//! file, the field and the fix. All checks run and all problems are reported at once.
//!
//! Rejected: egress mode `dev-open`; a browser agent whose allowlist (forge.yaml
//! `egress.allowed_domains` plus the skills' `egress_domains`, model hosts not counted) is empty
//! or only `$VAR` entries that cannot be reviewed at package time; any allowlist entry that
//! amounts to open egress (`*`, `*.*`, `*.com`-style single-label wildcards, or `*` anywhere but
//! a leading `*.`), browser or not; dev-only tools in forge.yaml `tools`; an audit with errors;
//! `allow_private_ips: true` without `allowed_private_cidrs` narrowing it (rejected, not warned:
//! it opens the whole cluster network to the agent); an `http://` (unencrypted) MCP server URL
//! to a host outside the cluster ([`is_cluster_host`]); more than one replica
//! (`deploy.replicas.max > 1`) on the SQLite store, which each pod would keep for itself; a
//! forge.yaml secret bound to an origin or host the egress policy does not allow.

use forge_skills::EgressMode;

use crate::error::ProdProblem;
use crate::spec::BuildSpec;

/// Tools meant for local development only (same list as initializ/forge).
pub const DEV_ONLY_TOOLS: &[&str] = &[
    "local_shell",
    "local_file_browser",
    "debug_console",
    "test_runner",
];

const CURATED_HINT: &str = "general browsing needs a curated `egress_domains` list: a production browser agent may only visit the sites you name";

/// True when an allowlist entry lets the agent reach (nearly) any host.
pub fn is_open_wildcard(entry: &str) -> bool {
    let host = entry.trim().trim_end_matches('.');
    let host = match host.rsplit_once(':') {
        Some((h, p)) if p.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    };
    if !host.contains('*') {
        return false;
    }
    match host.strip_prefix("*.") {
        // `*.example.com` is a curated suffix; `*.com`, `*.*` and `*.co.*` are not.
        Some(rest) => rest.contains('*') || !rest.contains('.'),
        None => true,
    }
}

/// Whether `host` (lowercase, from a URL) names something inside the cluster or the pod, where
/// plain http does not cross an untrusted network: a single-label service name (`mcp`), a
/// Kubernetes service name (`*.svc`, `*.svc.cluster.local`, `*.cluster.local`), `localhost`, or
/// a loopback or private IP address literal (10/8, 172.16/12, 192.168/16, fc00::/7).
pub fn is_cluster_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = h.parse::<std::net::IpAddr>() {
        return match ip {
            std::net::IpAddr::V4(v4) => v4.is_loopback() || v4.is_private(),
            std::net::IpAddr::V6(v6) => v6.is_loopback() || (v6.segments()[0] & 0xfe00) == 0xfc00,
        };
    }
    let h = h.trim_end_matches('.');
    !h.is_empty()
        && (!h.contains('.')
            || h.ends_with(".svc")
            || h.ends_with(".svc.cluster.local")
            || h.ends_with(".cluster.local"))
}

/// Runs every production check on `spec`.
pub fn prod_problems(spec: &BuildSpec) -> Vec<ProdProblem> {
    let config = spec.config_path.display().to_string();
    let browser = spec.needs_browser();
    let browser_skills: Vec<&crate::spec::SkillSpec> = spec
        .skills
        .iter()
        .filter(|s| s.capabilities.iter().any(|c| c == "browser"))
        .collect();
    let mut out = Vec::new();

    if spec.egress.mode == EgressMode::DevOpen {
        let mut problem = "egress mode `dev-open` lets the agent reach any public host".to_string();
        let mut fix = "set `egress.mode: allowlist` and list the hosts the agent needs in `egress.allowed_domains`".to_string();
        if browser {
            problem.push_str(&format!(
                "; this agent has the browser (skills: {}), so any web page could be loaded",
                browser_skills
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            fix = format!("{fix}; {CURATED_HINT}");
        }
        out.push(ProdProblem {
            file: config.clone(),
            field: "egress.mode".into(),
            problem,
            fix,
        });
    }

    // Open wildcards anywhere in the allowlist.
    for d in &spec.egress.allowed_domains {
        if is_open_wildcard(d) {
            out.push(ProdProblem {
                file: config.clone(),
                field: "egress.allowed_domains".into(),
                problem: format!("`{d}` matches (nearly) every host, which amounts to open egress"),
                fix: format!(
                    "replace it with the exact hosts or `*.yourdomain.example` suffixes the agent needs{}",
                    if browser { format!("; {CURATED_HINT}") } else { String::new() }
                ),
            });
        }
    }
    for skill in &spec.skills {
        for d in &skill.egress_domains {
            if is_open_wildcard(d) {
                out.push(ProdProblem {
                    file: skill.file.clone(),
                    field: "metadata.forge.egress_domains".into(),
                    problem: format!(
                        "`{d}` matches (nearly) every host, which amounts to open egress"
                    ),
                    fix: format!("list exact hosts instead; {CURATED_HINT}"),
                });
            }
        }
    }

    // A browser agent must name what it may browse.
    if browser && spec.egress.mode == EgressMode::DenyAll {
        out.push(ProdProblem {
            file: config.clone(),
            field: "egress.mode".into(),
            problem: format!(
                "egress mode `deny-all` ignores every allowlist entry, so the browser (skills: {}) can load nothing",
                browser_skills.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
            fix: format!(
                "set `egress.mode: allowlist` and list the sites in `egress.allowed_domains`; {CURATED_HINT}"
            ),
        });
    } else if browser && spec.egress.mode != EgressMode::DevOpen {
        let reviewable: Vec<&String> = spec
            .egress
            .allowed_domains
            .iter()
            .chain(&spec.egress.skill_domains)
            .filter(|d| !d.contains('$') && !d.trim().is_empty())
            .collect();
        if reviewable.is_empty() {
            let files: Vec<String> = browser_skills.iter().map(|s| s.file.clone()).collect();
            let unresolved: Vec<&String> = spec
                .egress
                .allowed_domains
                .iter()
                .chain(&spec.egress.skill_domains)
                .filter(|d| d.contains('$'))
                .collect();
            let mut problem = format!(
                "the browser (skills: {}) has an empty effective allowlist",
                browser_skills
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if !unresolved.is_empty() {
                problem.push_str(&format!(
                    " (only {} which expand at run time and cannot be reviewed here)",
                    unresolved
                        .iter()
                        .map(|d| format!("`{d}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            out.push(ProdProblem {
                file: config.clone(),
                field: "egress.allowed_domains".into(),
                problem,
                fix: format!(
                    "{CURATED_HINT}: set `egress.mode: allowlist` and list them in `egress.allowed_domains` (or in `metadata.forge.egress_domains` of {})",
                    if files.is_empty() { "the browser skill".to_string() } else { files.join(", ") }
                ),
            });
        }
    }

    for tool in &spec.configured_tools {
        if DEV_ONLY_TOOLS.contains(&tool.as_str()) {
            out.push(ProdProblem {
                file: config.clone(),
                field: format!("tools[name={tool}]"),
                problem: format!("`{tool}` is a development-only tool"),
                fix: "remove it from `tools` for production builds".into(),
            });
        }
    }

    for reason in &spec.audit.errors {
        out.push(ProdProblem {
            file: "skills (forge skills audit)".into(),
            field: "audit".into(),
            problem: reason.clone(),
            fix: "change the skill so `forge skills audit` passes".into(),
        });
    }

    // Every secret's origins and hosts must be reachable under the egress policy (otherwise the
    // secret is unusable there, or the binding names a host nobody reviewed).
    for secret in &spec.secrets.entries {
        for outside in secret.outside_allowlist(spec.egress.mode, &spec.all_domains()) {
            out.push(ProdProblem {
                file: config.clone(),
                field: format!("secrets.{}", secret.name),
                problem: format!(
                    "secret `{}` is bound to {outside}, which the egress policy does not allow",
                    secret.name
                ),
                fix: format!(
                    "add {outside} to `egress.allowed_domains` (with its port when not 80/443), or remove it from the secret's origins/hosts"
                ),
            });
        }
    }

    // Every login profile's origins likewise (a profile keeps cookies only for sites the agent
    // may reach).
    for profile in &spec.profiles {
        for outside in profile.outside_allowlist(spec.egress.mode, &spec.all_domains()) {
            out.push(ProdProblem {
                file: config.clone(),
                field: format!("browser.profiles.{}", profile.name),
                problem: format!(
                    "profile `{}` keeps the login of {outside}, which the egress policy does not allow",
                    profile.name
                ),
                fix: format!(
                    "add {outside} to `egress.allowed_domains` (with its port when not 80/443), or remove it from the profile's origins"
                ),
            });
        }
    }

    for (i, m) in spec.mcp_servers.iter().enumerate() {
        let Some(url) = m.url.as_deref() else {
            continue;
        };
        let Ok(u) = url::Url::parse(url) else {
            continue;
        };
        if u.scheme() != "http" {
            continue;
        }
        let host = u.host_str().unwrap_or_default().to_ascii_lowercase();
        if !is_cluster_host(&host) {
            out.push(ProdProblem {
                file: config.clone(),
                field: format!("mcp.servers[{i}].url"),
                problem: format!(
                    "MCP server `{}` is reached over plain http at {url}: its token and every tool call would cross the network unencrypted to {host}, a host outside the cluster",
                    m.name
                ),
                fix: "use an https:// URL, or a cluster-internal service name (`name`, `name.namespace.svc`, `*.svc.cluster.local`)".into(),
            });
        }
    }

    if spec.deploy.replicas_max > 1 && spec.deploy.postgres_url.is_none() {
        out.push(ProdProblem {
            file: config.clone(),
            field: "deploy.replicas.max".into(),
            problem: format!(
                "{} replicas would each keep tasks in their own SQLite file: a tasks/get, tasks/cancel or resubscribe that lands on another pod would not find the task",
                spec.deploy.replicas_max
            ),
            fix: "set `state.url: postgres://USER@HOST:5432/DB` (and the full URL with its password in the FORGE_STATE_URL Secret key), or `deploy.replicas.max: 1`".into(),
        });
    }

    if spec.egress.allow_private_ips && spec.egress.allowed_private_cidrs.is_empty() {
        out.push(ProdProblem {
            file: config.clone(),
            field: "egress.allow_private_ips".into(),
            problem: "`allow_private_ips: true` without `allowed_private_cidrs` opens every private network (10/8, 172.16/12, 192.168/16, fc00::/7) to the agent".into(),
            fix: "set `allow_private_ips: false` and list only the ranges the agent needs in `egress.allowed_private_cidrs` (e.g. `10.20.0.0/16`)".into(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{BrowserSpec, EgressSpec, SkillSpec};

    fn browser_spec(mode: EgressMode, allowed: &[&str], skill_domains: &[&str]) -> BuildSpec {
        BuildSpec {
            agent_id: "a".into(),
            version: "1".into(),
            config_path: "agent/forge.yaml".into(),
            capabilities: vec!["browser".into()],
            browser: Some(BrowserSpec {
                skills: vec!["web".into()],
                allow_sensitive_fill: false,
                ..Default::default()
            }),
            skills: vec![SkillSpec {
                name: "web".into(),
                file: "skills/web/SKILL.md".into(),
                capabilities: vec!["browser".into()],
                egress_domains: skill_domains.iter().map(|d| d.to_string()).collect(),
                ..Default::default()
            }],
            egress: EgressSpec {
                mode,
                allowed_domains: allowed.iter().map(|d| d.to_string()).collect(),
                skill_domains: skill_domains.iter().map(|d| d.to_string()).collect(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn curated_browser_agent_passes() {
        assert_eq!(
            prod_problems(&browser_spec(
                EgressMode::Allowlist,
                &["docs.example.com"],
                &[]
            )),
            vec![]
        );
    }

    #[test]
    fn browser_allowlist_must_be_reviewable_and_not_open() {
        let p = prod_problems(&browser_spec(EgressMode::Allowlist, &[], &[]));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].field, "egress.allowed_domains");
        assert!(p[0].fix.contains("curated `egress_domains` list"), "{p:?}");

        let p = prod_problems(&browser_spec(
            EgressMode::Allowlist,
            &[],
            &["$BROWSE_HOSTS"],
        ));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].problem.contains("`$BROWSE_HOSTS`"), "{p:?}");

        let p = prod_problems(&browser_spec(
            EgressMode::Allowlist,
            &["docs.example.com"],
            &["*"],
        ));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].file, "skills/web/SKILL.md");
        assert_eq!(p[0].field, "metadata.forge.egress_domains");
    }

    #[test]
    fn deny_all_browser_agent_is_rejected_with_the_mode_to_set() {
        let p = prod_problems(&browser_spec(
            EgressMode::DenyAll,
            &["docs.example.com"],
            &[],
        ));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].field, "egress.mode");
        assert!(p[0].fix.contains("egress.mode: allowlist"), "{p:?}");
    }

    #[test]
    fn dev_tools_private_ips_and_audit_errors_are_each_reported() {
        let mut s = browser_spec(EgressMode::Allowlist, &["docs.example.com"], &[]);
        s.configured_tools = vec!["local_shell".into(), "http_request".into()];
        s.egress.allow_private_ips = true;
        s.audit.errors = vec!["web: max_risk_score: 95 > 90".into()];
        let p = prod_problems(&s);
        let fields: Vec<&str> = p.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "tools[name=local_shell]",
                "audit",
                "egress.allow_private_ips"
            ]
        );
        s.egress.allowed_private_cidrs = vec!["10.20.0.0/16".into()];
        assert_eq!(prod_problems(&s).len(), 2);
    }

    #[test]
    fn plain_http_mcp_urls_are_rejected_outside_the_cluster() {
        let mut s = browser_spec(EgressMode::Allowlist, &["example.com"], &[]);
        s.browser = None;
        s.mcp_servers = vec![
            crate::spec::McpServerSpec {
                name: "linear".into(),
                transport: "http".into(),
                url: Some("http://mcp.example.com/mcp".into()),
                required: false,
            },
            crate::spec::McpServerSpec {
                name: "inside".into(),
                transport: "http".into(),
                url: Some("http://tools.agents.svc.cluster.local:8080/mcp".into()),
                required: false,
            },
            crate::spec::McpServerSpec {
                name: "tls".into(),
                transport: "http".into(),
                url: Some("https://mcp.example.com/mcp".into()),
                required: false,
            },
        ];
        let p = prod_problems(&s);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].field, "mcp.servers[0].url");
        assert!(p[0].problem.contains("mcp.example.com"), "{p:?}");
        assert!(p[0].fix.contains("https://"), "{p:?}");
        for inside in ["mcp", "mcp.tools.svc", "10.0.3.4", "127.0.0.1", "localhost"] {
            assert!(is_cluster_host(inside), "{inside}");
        }
        for outside in ["mcp.example.com", "8.8.8.8", "example.svc.com"] {
            assert!(!is_cluster_host(outside), "{outside}");
        }
        // Their hosts count as egress.
        assert_eq!(
            s.all_domains(),
            vec![
                "example.com",
                "mcp.example.com",
                "tools.agents.svc.cluster.local:8080"
            ]
        );
    }

    #[test]
    fn a_fleet_needs_postgres() {
        let mut s = browser_spec(EgressMode::Allowlist, &["docs.example.com"], &[]);
        s.deploy.replicas_max = 3;
        let p = prod_problems(&s);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].field, "deploy.replicas.max");
        assert!(p[0].problem.contains("3 replicas"), "{p:?}");
        assert!(p[0].fix.contains("FORGE_STATE_URL"), "{p:?}");
        s.deploy.postgres_url = Some("postgres://forge@db.data.svc:5432/forge".into());
        assert!(prod_problems(&s).is_empty());
        s.deploy.postgres_url = None;
        s.deploy.replicas_max = 1;
        assert!(
            prod_problems(&s).is_empty(),
            "one replica on SQLite is fine"
        );
    }

    #[test]
    fn open_wildcards_are_recognised() {
        for open in [
            "*",
            "*.*",
            "*.com",
            "*:443",
            "*.co.*",
            "foo.*",
            "*.",
            "**.example.com",
        ] {
            assert!(is_open_wildcard(open), "{open}");
        }
        for curated in [
            "example.com",
            "*.example.com",
            "*.example.com:8443",
            "api.example.org",
        ] {
            assert!(!is_open_wildcard(curated), "{curated}");
        }
    }
}
