//! forge.yaml: the agent file (`agent_id`, `version`, `model`, `tools`, `skills.path`, `egress`,
//! `security.policy_path`, `security.confinement`, `denied_tools`, `mcp.servers` (read in `mcp.rs`), `state` and `deploy`
//! (checked in `fleet.rs`), `browser` and `a2a` (read in `browser.rs`), `workspaces.retention`), `secrets` (read in `secrets.rs`). Errors are diagnostics pointing at the YAML; unknown keys are warnings
//! that name them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use miette::NamedSource;
use serde::{Deserialize, Serialize};

use crate::a2a::A2aSettings;
use crate::browser::{BrowserSettings, Reader};
use crate::fleet::{DeployConfig, StateConfig};
use crate::mcp::McpConfig;
use crate::skill::suggest;
use crate::yaml::{Doc, Kind, Seg};
use crate::{Error, SourceDiagnostic};

/// The parsed forge.yaml.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ForgeConfig {
    pub agent_id: String,
    pub version: String,
    #[serde(default)]
    pub framework: Option<String>,
    #[serde(default)]
    pub model: Option<ModelConfig>,
    #[serde(default)]
    pub tools: Vec<ToolConfig>,
    #[serde(default)]
    pub skills: SkillsConfig,
    #[serde(default)]
    pub egress: EgressConfig,
    #[serde(default)]
    pub security: SecurityConfig,
    /// Tools this agent must never have, whatever its skills register (unioned with the skills'
    /// `denied_tools`; applied after every registration step).
    #[serde(default)]
    pub denied_tools: Vec<String>,
    /// MCP servers whose tools the agent gets (`mcp.servers`); read from the marked tree by
    /// `mcp.rs`, so serde skips it.
    #[serde(default, skip_deserializing)]
    pub mcp: McpConfig,
    /// Where tasks, conversations and artifacts are kept (`state`; see `fleet.rs`).
    #[serde(default)]
    pub state: StateConfig,
    /// How many replicas serve the agent (`deploy`; see `fleet.rs`).
    #[serde(default)]
    pub deploy: DeployConfig,
    /// The browser's limits, timeouts, viewport and sub-agent model (`browser`; read from the
    /// marked tree by `browser.rs`, so serde skips it).
    #[serde(default, skip_deserializing)]
    pub browser: BrowserSettings,
    /// How task results go out over A2A (`a2a`; read by `browser.rs`).
    #[serde(default, skip_deserializing)]
    pub a2a: A2aSettings,
    /// Per-task budgets: defaults and caps (`tasks`; see `tasks.rs`).
    #[serde(default)]
    pub tasks: crate::tasks::TasksConfig,
    /// The per-conversation files directories (`workspaces`): how long an idle one is kept.
    #[serde(default)]
    pub workspaces: WorkspacesConfig,
    /// Credentials by reference (`secrets`; read from the marked tree by `secrets.rs`, so serde
    /// skips it).
    #[serde(default, skip_deserializing)]
    pub secrets: crate::secrets::SecretsConfig,
    /// Where the file was read from.
    #[serde(skip)]
    pub path: PathBuf,
    /// Unknown keys, one warning each (severity Warning), pointing at the key.
    #[serde(skip)]
    pub warnings: Vec<SourceDiagnostic>,
    /// The file's text, for diagnostics raised after parsing ([`ForgeConfig::check_mcp_env`]).
    #[serde(skip)]
    source: Option<Arc<NamedSource<String>>>,
}

/// `workspaces`: each conversation, MCP session or one-off run writes into its own files
/// directory under `.forge/files`; one idle for longer than `retention` (the one duration
/// grammar, e.g. `24h`, `90m`) is removed. Its artifacts live on in the task store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspacesConfig {
    #[serde(with = "crate::duration::text", default = "default_retention")]
    pub retention: std::time::Duration,
}

/// Default of `workspaces.retention`: 24 hours.
pub const DEFAULT_WORKSPACE_RETENTION: std::time::Duration =
    std::time::Duration::from_secs(24 * 3600);

fn default_retention() -> std::time::Duration {
    DEFAULT_WORKSPACE_RETENTION
}

impl Default for WorkspacesConfig {
    fn default() -> Self {
        Self {
            retention: DEFAULT_WORKSPACE_RETENTION,
        }
    }
}

/// `model`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelConfig {
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub fallbacks: Vec<ModelFallback>,
}

/// An entry of `model.fallbacks`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelFallback {
    pub provider: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub base_url: Option<String>,
}

/// An entry of `tools`: a builtin tool to register, with its tool-specific config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolConfig {
    pub name: String,
    #[serde(default)]
    pub config: serde_json::Value,
}

/// `skills`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillsConfig {
    /// The agent's root skill file, relative to the agent dir (default `SKILL.md`, loaded when it
    /// exists; an explicit path that does not exist is an error).
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// forge extension: embedded skills to activate by name (e.g. `[web-browse]`).
    #[serde(default)]
    pub embedded: Vec<String>,
}

/// `egress.mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EgressMode {
    /// Nothing leaves (the default).
    #[default]
    DenyAll,
    /// Only listed hosts (plus the skills' egress_domains).
    Allowlist,
    /// Any host; the IP policy still applies.
    DevOpen,
}

impl EgressMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            EgressMode::DenyAll => "deny-all",
            EgressMode::Allowlist => "allowlist",
            EgressMode::DevOpen => "dev-open",
        }
    }
}

/// Default of `egress.max_tunnels`.
pub(crate) const DEFAULT_MAX_TUNNELS: u32 = 256;
/// Largest `egress.max_tunnels` accepted.
pub(crate) const MAX_TUNNELS_LIMIT: u32 = 16_384;

/// `egress`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressConfig {
    #[serde(default)]
    pub mode: EgressMode,
    #[serde(default)]
    pub allowed_domains: Vec<String>,
    #[serde(default)]
    pub allow_private_ips: bool,
    #[serde(default)]
    pub allowed_private_cidrs: Vec<String>,
    /// Concurrent CONNECT tunnels the egress proxy holds open (1 to 16384); past it a new CONNECT
    /// gets 429 with `Retry-After` at once.
    #[serde(default = "default_max_tunnels")]
    pub max_tunnels: u32,
}

fn default_max_tunnels() -> u32 {
    DEFAULT_MAX_TUNNELS
}

impl Default for EgressConfig {
    fn default() -> Self {
        EgressConfig {
            mode: EgressMode::default(),
            allowed_domains: Vec::new(),
            allow_private_ips: false,
            allowed_private_cidrs: Vec::new(),
            max_tunnels: DEFAULT_MAX_TUNNELS,
        }
    }
}

/// `security`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecurityConfig {
    /// Audit policy file (relative to the agent dir).
    #[serde(default)]
    pub policy_path: Option<PathBuf>,
    /// Network confinement of Chromium, cli_execute and skill scripts (`security.confinement`).
    #[serde(default)]
    pub confinement: Confinement,
}

/// `security.confinement`: whether children (Chromium, cli_execute, skill scripts) run in a
/// network namespace whose only reachable address is forge's egress proxy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Confinement {
    /// Confine when the platform allows it; otherwise run proxy-only and say so (the default).
    #[default]
    Auto,
    /// Confine, or refuse to start (naming the reason and the fix).
    Required,
    /// Never confine: proxy variables and Chromium's proxy flag only.
    Off,
}

impl Confinement {
    /// The forge.yaml spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Confinement::Auto => "auto",
            Confinement::Required => "required",
            Confinement::Off => "off",
        }
    }
}

const KNOWN: &[(&[&str], &[&str])] = &[
    (
        &[],
        &[
            "agent_id",
            "version",
            "framework",
            "model",
            "tools",
            "skills",
            "egress",
            "security",
            "denied_tools",
            "mcp",
            "state",
            "deploy",
            "browser",
            "a2a",
            "tasks",
            "workspaces",
            "secrets",
        ],
    ),
    (&["workspaces"], &["retention"]),
    (
        &["tasks"],
        &[
            "max_steps",
            "max_seconds",
            "max_steps_cap",
            "max_seconds_cap",
        ],
    ),
    (
        &["state"],
        &["url", "keep_tasks", "keep_days", "max_artifact_bytes"],
    ),
    (&["deploy"], &["replicas"]),
    (&["deploy", "replicas"], &["min", "max"]),
    (&["model"], &["provider", "name", "base_url", "fallbacks"]),
    (&["skills"], &["path", "embedded"]),
    (
        &["egress"],
        &[
            "mode",
            "allowed_domains",
            "allow_private_ips",
            "allowed_private_cidrs",
            "max_tunnels",
        ],
    ),
    (&["security"], &["policy_path", "confinement"]),
];

impl ForgeConfig {
    /// Read and parse forge.yaml at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<ForgeConfig, Error> {
        let path = path.as_ref();
        let text = crate::discovery::read_limited(path)?;
        Self::parse(&text, path)
    }

    /// Parse forge.yaml `text` (read from `path`, used in diagnostics).
    pub fn parse(text: &str, path: &Path) -> Result<ForgeConfig, Error> {
        let invalid = |problems: Vec<SourceDiagnostic>| Error::Invalid {
            path: path.to_path_buf(),
            problems,
        };
        let src = Arc::new(
            NamedSource::new(path.display().to_string(), text.to_string()).with_language("yaml"),
        );
        let doc = Doc::new(path, src.clone(), 0, text).map_err(|d| invalid(vec![*d]))?;
        if !matches!(doc.tree.kind, Kind::Map(_)) {
            return Err(invalid(vec![doc.diag(
                "forge::config::not-a-mapping",
                "forge.yaml is not a YAML mapping",
                &[],
                "expected `key: value` lines",
                Some("a minimal forge.yaml is `agent_id: my-agent` and `version: 0.1.0`".into()),
            )]));
        }
        let mut missing = Vec::new();
        for key in ["agent_id", "version"] {
            let present = doc
                .tree
                .get(&[Seg::Key(key)])
                .is_some_and(|n| matches!(&n.kind, Kind::Scalar(s) if !s.trim().is_empty()));
            if !present {
                missing.push(doc.diag(
                    "forge::config::missing-field",
                    format!("forge.yaml is missing the required field `{key}`"),
                    &[Seg::Key(key)],
                    format!("`{key}` is required"),
                    Some(format!(
                        "add `{key}: {}` at the top level",
                        if key == "version" {
                            "0.1.0"
                        } else {
                            "my-agent"
                        }
                    )),
                ));
            }
        }
        if !missing.is_empty() {
            return Err(invalid(missing));
        }
        // egress.mode gets a precise diagnostic (serde's "unknown variant" lacks the hint).
        if let Some(node) = doc.tree.get(&[Seg::Key("egress"), Seg::Key("mode")]) {
            if let Kind::Scalar(m) = &node.kind {
                const MODES: &[&str] = &["deny-all", "allowlist", "dev-open"];
                if !MODES.contains(&m.as_str()) {
                    return Err(invalid(vec![doc.diag(
                        "forge::config::egress-mode",
                        format!("unknown egress mode \"{m}\" (known: {})", MODES.join(", ")),
                        &[Seg::Key("egress"), Seg::Key("mode")],
                        "unknown mode",
                        Some(format!(
                            "use one of {}{}",
                            MODES.join(", "),
                            suggest(m, MODES)
                                .map(|s| format!(" (did you mean `{s}`?)"))
                                .unwrap_or_default()
                        )),
                    )]));
                }
            }
        }
        // security.confinement likewise.
        if let Some(node) = doc
            .tree
            .get(&[Seg::Key("security"), Seg::Key("confinement")])
        {
            const VALUES: &[&str] = &["auto", "required", "off"];
            let bad = match &node.kind {
                Kind::Scalar(v) if VALUES.contains(&v.as_str()) => None,
                Kind::Scalar(v) => Some(format!("\"{v}\"")),
                _ => Some("a non-scalar value".to_string()),
            };
            if let Some(bad) = bad {
                let guess = match &node.kind {
                    Kind::Scalar(v) => suggest(v, VALUES)
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                return Err(invalid(vec![doc.diag(
                    "forge::config::confinement",
                    format!(
                        "unknown security.confinement {bad} (known: {})",
                        VALUES.join(", ")
                    ),
                    &[Seg::Key("security"), Seg::Key("confinement")],
                    "unknown value",
                    Some(format!(
                        "use auto (confine when the platform allows, else proxy-only), required \
                         (refuse to start without confinement) or off{guess}"
                    )),
                )]));
            }
        }
        let mut cfg: ForgeConfig = serde_norway::from_str(text)
            .map_err(|e| invalid(vec![doc.serde_error(&e, "forge.yaml")]))?;
        let (mcp, mcp_errors, mcp_warnings) = crate::mcp::read(&doc);
        if !mcp_errors.is_empty() {
            return Err(invalid(mcp_errors));
        }
        cfg.mcp = mcp;
        let (secrets, secret_errors, secret_warnings) = crate::secrets::read(&doc);
        if !secret_errors.is_empty() {
            return Err(invalid(secret_errors));
        }
        cfg.secrets = secrets;
        if !(1..=MAX_TUNNELS_LIMIT).contains(&cfg.egress.max_tunnels) {
            return Err(invalid(vec![doc.diag(
                "forge::config::egress-max-tunnels",
                format!(
                    "egress.max_tunnels is {}, outside 1..={MAX_TUNNELS_LIMIT}",
                    cfg.egress.max_tunnels
                ),
                &[Seg::Key("egress"), Seg::Key("max_tunnels")],
                "out of range",
                Some(format!(
                    "use a number from 1 to {MAX_TUNNELS_LIMIT} (concurrent CONNECT tunnels of the egress proxy), or remove it for the default ({DEFAULT_MAX_TUNNELS})"
                )),
            )]));
        }
        let mut reader = Reader::new(&doc);
        let browser = reader.browser();
        let a2a = crate::a2a::read(&mut reader);
        let (browser_errors, browser_warnings) = reader.finish();
        if !browser_errors.is_empty() {
            return Err(invalid(browser_errors));
        }
        cfg.browser = browser;
        cfg.a2a = a2a;
        let (fleet_errors, fleet_warnings): (Vec<_>, Vec<_>) =
            crate::fleet::check(&doc, &cfg.state, &cfg.deploy)
                .into_iter()
                .partition(|d| d.severity != miette::Severity::Warning);
        if !fleet_errors.is_empty() {
            return Err(invalid(fleet_errors));
        }
        let task_errors = crate::tasks::check(&doc, &cfg.tasks);
        if !task_errors.is_empty() {
            return Err(invalid(task_errors));
        }
        cfg.path = path.to_path_buf();
        cfg.warnings = unknown_keys(&doc);
        cfg.warnings.extend(mcp_warnings);
        cfg.warnings.extend(secret_warnings);
        cfg.warnings.extend(fleet_warnings);
        cfg.warnings.extend(browser_warnings);
        cfg.source = Some(src);
        Ok(cfg)
    }

    /// Check that every **required** MCP server's `auth.token_env` is set (non-empty) according to
    /// `lookup` (the process environment in forge: `|k| std::env::var(k).ok()`). Each unset
    /// variable is a diagnostic pointing at its `token_env`. A server that is not required is not
    /// checked here: without its token its tools are absent, with the reason, at startup.
    ///
    /// Kept apart from [`ForgeConfig::parse`] because `forge build`, `forge skills audit` and
    /// `forge skills validate` read the same file on machines that do not hold the tokens.
    pub fn check_mcp_env(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<(), Error> {
        let mut problems = Vec::new();
        for (i, server) in self.mcp.servers.iter().enumerate() {
            let Some(auth) = server.auth.as_ref().filter(|_| server.required) else {
                continue;
            };
            if lookup(&auth.token_env).is_some_and(|v| !v.is_empty()) {
                continue;
            }
            let message = format!(
                "MCP server \"{}\" is required but its token variable {} is not set",
                server.name, auth.token_env
            );
            let help = format!(
                "export {} with the server's token before starting the agent, or set `required: false` to start without this server's tools",
                auth.token_env
            );
            let at = [
                Seg::Key("mcp"),
                Seg::Key("servers"),
                Seg::Index(i),
                Seg::Key("auth"),
                Seg::Key("token_env"),
            ];
            let diag = match &self.source {
                Some(src) => match Doc::new(&self.path, src.clone(), 0, src.inner()) {
                    Ok(doc) => doc.diag(
                        "forge::config::mcp-token-env",
                        message,
                        &at,
                        "not set in the environment",
                        Some(help),
                    ),
                    Err(d) => *d,
                },
                None => {
                    let src = Arc::new(NamedSource::new(
                        self.path.display().to_string(),
                        String::new(),
                    ));
                    SourceDiagnostic::new(
                        &self.path,
                        &src,
                        "forge::config::mcp-token-env",
                        message,
                        (0, 0),
                        "not set in the environment",
                        Some(help),
                    )
                }
            };
            problems.push(diag);
        }
        match problems.is_empty() {
            true => Ok(()),
            false => Err(Error::Invalid {
                path: self.path.clone(),
                problems,
            }),
        }
    }

    /// The directory holding forge.yaml (the agent dir).
    pub fn dir(&self) -> PathBuf {
        match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }
}

fn unknown_keys(doc: &Doc<'_>) -> Vec<SourceDiagnostic> {
    let mut out = Vec::new();
    for (sub, known) in KNOWN {
        let path: Vec<Seg<'_>> = sub.iter().map(|k| Seg::Key(k)).collect();
        let Some(node) = doc.tree.get(&path) else {
            continue;
        };
        for (key, key_node) in node.map_keys() {
            if known.contains(&key) {
                continue;
            }
            let where_ = if sub.is_empty() {
                "forge.yaml".to_string()
            } else {
                format!("forge.yaml `{}`", sub.join("."))
            };
            out.push(
                doc.key_diag(
                    "forge::config::unknown-key",
                    format!("unknown key `{key}` in {where_}; it is ignored"),
                    key_node,
                    "unknown key",
                    Some(format!(
                        "known keys here: {}{}",
                        known.join(", "),
                        suggest(key, known)
                            .map(|s| format!(" (did you mean `{s}`?)"))
                            .unwrap_or_default()
                    )),
                )
                .warning(),
            );
        }
    }
    out
}

#[cfg(test)]
mod workspace_tests {
    use super::*;

    const HEAD: &str = "agent_id: a\nversion: 0.1.0\n";

    #[test]
    fn workspaces_retention_defaults_to_24h_and_takes_the_duration_grammar() {
        let c = ForgeConfig::parse(HEAD, Path::new("forge.yaml")).expect("parses");
        assert_eq!(c.workspaces.retention, DEFAULT_WORKSPACE_RETENTION);
        let c = ForgeConfig::parse(
            &format!("{HEAD}workspaces:\n  retention: 90m\n"),
            Path::new("forge.yaml"),
        )
        .expect("parses");
        assert_eq!(
            c.workspaces.retention,
            std::time::Duration::from_secs(90 * 60)
        );
        assert!(c.warnings.is_empty());
        assert!(ForgeConfig::parse(
            &format!("{HEAD}workspaces:\n  retention: soon\n"),
            Path::new("forge.yaml"),
        )
        .is_err());
    }
}
