//! The build's input: [`BuildSpec`], everything `forge build` needs to know about an agent, in
//! plain data. The adapter in `agent.rs` fills it from a loaded `forge_skills::Agent`; tests can
//! build one by hand. Also the checks on names that end up in a Dockerfile or a manifest
//! (agent id, version, apt package names), because those strings are pasted into files that
//! other programs parse.

use std::path::PathBuf;

use forge_skills::EgressMode;
use serde::Serialize;

use crate::error::BuildError;

/// Everything the build reads about one agent.
#[derive(Debug, Clone, Default)]
pub struct BuildSpec {
    /// forge.yaml `agent_id`: image name, Kubernetes object names and labels.
    pub agent_id: String,
    /// forge.yaml `version`: the image tag.
    pub version: String,
    /// forge.yaml `framework`, when set.
    pub framework: Option<String>,
    /// Path of forge.yaml (used in messages and copied into the image).
    pub config_path: PathBuf,
    /// The agent directory (forge.yaml's parent).
    pub agent_dir: PathBuf,
    /// Other agent files to copy into the image besides forge.yaml and `skills/` (the root skill
    /// file named by forge.yaml `skills.path`), relative to `agent_dir`.
    pub extra_agent_files: Vec<PathBuf>,
    /// forge.yaml `model`.
    pub model: ModelSpec,
    /// Active skills, in load order.
    pub skills: Vec<SkillSpec>,
    /// Aggregated capabilities of the active skills (e.g. `browser`).
    pub capabilities: Vec<String>,
    /// The derived browser view: `Some` when an active skill declares `browser`.
    pub browser: Option<BrowserSpec>,
    /// apt packages declared by skills (`requires.bins[].apt`).
    pub apt_packages: Vec<AptPackage>,
    /// Environment variable names the agent needs.
    pub env: EnvSpec,
    /// Egress settings (forge.yaml `egress` plus the skills' `egress_domains`).
    pub egress: EgressSpec,
    /// forge.yaml `tools[].name`.
    pub configured_tools: Vec<String>,
    /// Binaries `cli_execute` would allow, derived from the skills' bins (shells removed).
    pub cli_binaries: Vec<String>,
    /// Tools removed by `denied_tools` (skills and forge.yaml).
    pub denied_tools: Vec<String>,
    /// Which tools the agent gets and why (forge-skills' tool plan, which forge-runtime also
    /// assembles from); empty for a spec built by hand.
    pub tool_plan: forge_skills::ToolPlan,
    /// The security audit of the active skills.
    pub audit: AuditOutcome,
    /// forge.yaml `mcp.servers` (their http hosts count as egress, like the model host).
    pub mcp_servers: Vec<McpServerSpec>,
    /// forge.yaml `deploy` and `state`, as the manifests need them.
    pub deploy: DeploySpec,
    /// forge.yaml `security.confinement` (the Deployment's `forge.dev/confinement` annotation).
    pub confinement: forge_skills::Confinement,
    /// forge.yaml `secrets` (references only): env sources become Secret keys, file sources
    /// Secret mounts; `--prod` checks their bindings against the allowlist.
    pub secrets: forge_skills::SecretsConfig,
    /// forge.yaml `browser.profiles`: `--prod` checks their origins against the allowlist, and
    /// the Secret gets a `FORGE_PROFILE_KEY` key (the profiles' encryption key).
    pub profiles: Vec<forge_skills::ProfileSpec>,
}

/// How many replicas, which store, how long a pod may take to drain.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DeploySpec {
    /// `deploy.replicas.min`.
    pub replicas_min: u32,
    /// `deploy.replicas.max` (above 1: HorizontalPodAutoscaler and PodDisruptionBudget).
    pub replicas_max: u32,
    /// `state.url` when it names PostgreSQL (without the password, which belongs in the
    /// `FORGE_STATE_URL` Secret key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub postgres_url: Option<String>,
    /// The longest a task may run (the task time cap), in seconds: a pod being replaced gets
    /// this long to finish its tasks.
    pub task_seconds_cap: u64,
}

impl Default for DeploySpec {
    fn default() -> Self {
        Self {
            replicas_min: 1,
            replicas_max: 1,
            postgres_url: None,
            task_seconds_cap: DEFAULT_TASK_SECONDS_CAP,
        }
    }
}

/// The task time cap when forge.yaml sets none (`tasks.max_seconds_cap`).
pub(crate) const DEFAULT_TASK_SECONDS_CAP: u64 = forge_skills::DEFAULT_MAX_SECONDS_CAP;

impl DeploySpec {
    /// The PostgreSQL server's port (5432 unless the URL names one).
    pub fn postgres_port(&self) -> Option<u16> {
        let u = url::Url::parse(self.postgres_url.as_deref()?).ok()?;
        Some(u.port().unwrap_or(5432))
    }
}

/// An entry of forge.yaml `mcp.servers`, as the build sees it.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct McpServerSpec {
    pub name: String,
    /// `http` or `stdio`.
    pub transport: String,
    /// `http`: the endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub required: bool,
}

impl McpServerSpec {
    /// The allowlist entry of an http server: its host, with the port when the URL gives one.
    pub fn host(&self) -> Option<String> {
        let u = url::Url::parse(self.url.as_deref()?).ok()?;
        let host = u.host_str()?.to_ascii_lowercase();
        Some(match u.port() {
            Some(p) => format!("{host}:{p}"),
            None => host,
        })
    }
}

/// forge.yaml `model`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct ModelSpec {
    pub provider: Option<String>,
    pub name: Option<String>,
    pub base_url: Option<String>,
    /// `model.fallbacks`: tried when the primary fails; their hosts and keys count too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<ModelSpec>,
}

impl ModelSpec {
    /// The host (with a non-default port) this provider is reached at, if known.
    fn host(&self) -> Option<String> {
        match self.base_url.as_deref().filter(|b| !b.trim().is_empty()) {
            Some(base) => {
                let u = url::Url::parse(base).ok()?;
                let host = u.host_str()?.to_ascii_lowercase();
                Some(match u.port() {
                    Some(p) => format!("{host}:{p}"),
                    None => host,
                })
            }
            None => match self.provider.as_deref() {
                Some("openai") => Some("api.openai.com".to_string()),
                Some("anthropic") => Some("api.anthropic.com".to_string()),
                _ => None,
            },
        }
    }

    /// The API key variable and whether it is required (a custom base_url, such as Ollama or
    /// vLLM, often needs none; the vendor's API does).
    fn key(&self) -> Option<(&'static str, bool)> {
        let key = match self.provider.as_deref() {
            Some("openai") => "OPENAI_API_KEY",
            Some("anthropic") => "ANTHROPIC_API_KEY",
            _ => return None,
        };
        Some((key, self.base_url.is_none()))
    }
}

/// One active skill, as far as the build cares.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct SkillSpec {
    pub name: String,
    /// `embedded` or `local`.
    pub source: String,
    /// Path of the SKILL.md relative to the agent directory (or `<embedded>/name`), for messages.
    pub file: String,
    pub capabilities: Vec<String>,
    /// The skill's own `egress_domains`.
    pub egress_domains: Vec<String>,
    /// `## Tool:` sections and whether a script backs each.
    pub tools: Vec<SkillTool>,
}

/// A `## Tool: name` section of a skill.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct SkillTool {
    pub name: String,
    /// The script that implements it (relative to the skill dir), when one exists.
    pub script: Option<String>,
}

/// The browser view: which skills asked for the browser, and which engines they run on.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct BrowserSpec {
    pub skills: Vec<String>,
    pub allow_sensitive_fill: bool,
    /// The engines the agent's browser tools run on (forge.yaml `browser.engine`, and each
    /// skill's own `requires.browser_engine`); empty means the default engine, Chromium.
    pub engines: Vec<forge_skills::BrowserEngine>,
    /// Each browser skill and the engine serving it (agent.json shows it).
    pub skill_engines: Vec<forge_skills::SkillEngine>,
}

/// An apt package a skill asks for.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct AptPackage {
    /// Debian package name, optionally `name=version`.
    pub name: String,
    /// The skill that declared it.
    pub skill: String,
    /// The binary it provides.
    pub bin: String,
}

/// Environment variable names (never values).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct EnvSpec {
    pub required: Vec<String>,
    pub optional: Vec<String>,
    pub one_of: Vec<Vec<String>>,
}

/// Egress settings.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct EgressSpec {
    /// `deny-all`, `allowlist` or `dev-open` (serialised as those words).
    pub mode: EgressMode,
    /// forge.yaml `egress.allowed_domains`.
    pub allowed_domains: Vec<String>,
    /// Union of the active skills' `egress_domains`.
    pub skill_domains: Vec<String>,
    pub allow_private_ips: bool,
    pub allowed_private_cidrs: Vec<String>,
}

/// The audit of the active skills, already run.
#[derive(Debug, Clone)]
pub struct AuditOutcome {
    /// The report `forge skills audit --format json` prints; written with its timestamp set to
    /// the build's.
    pub report: forge_analyzer::AuditReport,
    /// One line per error-level or critical violation: `skill: rule: message`. Non-empty fails
    /// the build.
    pub errors: Vec<String>,
}

impl Default for AuditOutcome {
    /// The audit of no skills (passes).
    fn default() -> Self {
        AuditOutcome {
            report: forge_analyzer::audit(&[], &forge_analyzer::Policy::default()),
            errors: Vec::new(),
        }
    }
}

impl BuildSpec {
    /// True when the image needs Chromium: some active skill declares the `browser` capability
    /// (tool-bearing or instructional alike).
    pub fn needs_browser(&self) -> bool {
        self.browser.is_some() || self.capabilities.iter().any(|c| c == "browser")
    }

    /// The browser engines the image must carry, in [`forge_skills::BrowserEngine::NAMES`]
    /// order, each once: none for an agent without the browser, Chromium when it names none.
    pub fn browser_engines(&self) -> Vec<forge_skills::BrowserEngine> {
        if !self.needs_browser() {
            return Vec::new();
        }
        let named: &[forge_skills::BrowserEngine] =
            self.browser.as_ref().map_or(&[], |b| b.engines.as_slice());
        if named.is_empty() {
            return vec![forge_skills::BrowserEngine::Chromium];
        }
        forge_skills::BrowserEngine::NAMES
            .iter()
            .filter_map(|n| forge_skills::BrowserEngine::parse(n))
            .filter(|e| named.contains(e))
            .collect()
    }

    /// The browser skills served by `engine`, in skill order (a hand-built spec without
    /// per-skill engines: every browser skill, when `engine` is one the image carries).
    pub fn skills_on(&self, engine: forge_skills::BrowserEngine) -> Vec<String> {
        let Some(b) = &self.browser else {
            return Vec::new();
        };
        if b.skill_engines.is_empty() {
            return if self.browser_engines().contains(&engine) {
                b.skills.clone()
            } else {
                Vec::new()
            };
        }
        b.skill_engines
            .iter()
            .filter(|s| s.engine == engine)
            .map(|s| s.skill.clone())
            .collect()
    }

    /// Whether the image gets Chromium (its apt packages, fonts, `FORGE_BROWSER_BIN`).
    pub fn needs_chromium(&self) -> bool {
        self.browser_engines()
            .contains(&forge_skills::BrowserEngine::Chromium)
    }

    /// Whether the image gets Lightpanda (its binary, licence and `FORGE_LIGHTPANDA_BIN`).
    pub fn needs_lightpanda(&self) -> bool {
        self.browser_engines()
            .contains(&forge_skills::BrowserEngine::Lightpanda)
    }

    /// The hosts the model providers (primary, then fallbacks) are reached at; forge adds them
    /// to the allowlist itself.
    pub fn model_domains(&self) -> Vec<String> {
        let mut out = Vec::new();
        for m in std::iter::once(&self.model).chain(&self.model.fallbacks) {
            if let Some(h) = m.host() {
                push_unique(&mut out, h);
            }
        }
        out
    }

    /// The hosts of the http servers of forge.yaml `mcp.servers` (added to the policy by forge,
    /// like the model host).
    pub fn mcp_domains(&self) -> Vec<String> {
        let mut out = Vec::new();
        for m in &self.mcp_servers {
            if let Some(h) = m.host() {
                push_unique(&mut out, h);
            }
        }
        out
    }

    /// The hosts the agent may actually reach, as forge's egress policy builds them: forge.yaml
    /// domains, then skill domains, then model domains, then MCP server hosts, de-duplicated
    /// keeping the first occurrence. In `deny-all` mode forge.yaml and skill domains are ignored
    /// (as in forge-egress) and only forge's own hosts (model providers, MCP servers) remain.
    pub fn all_domains(&self) -> Vec<String> {
        let mut all = Vec::new();
        let listed: Vec<String> = if self.egress.mode == EgressMode::DenyAll {
            Vec::new()
        } else {
            self.egress
                .allowed_domains
                .iter()
                .chain(&self.egress.skill_domains)
                .cloned()
                .collect()
        };
        for d in listed
            .into_iter()
            .chain(self.model_domains())
            .chain(self.mcp_domains())
        {
            push_unique(&mut all, d);
        }
        all
    }

    /// The environment the container needs: skill env plus the model provider's API key.
    /// Returns (required, optional), sorted and de-duplicated; a name in both is required.
    pub fn env_names(&self) -> (Vec<String>, Vec<String>) {
        let mut required: Vec<String> = self.env.required.clone();
        let mut optional: Vec<String> = self.env.optional.clone();
        for group in &self.env.one_of {
            optional.extend(group.iter().cloned());
        }
        // The primary provider's key as it needs it; a fallback's key is optional.
        for (i, m) in std::iter::once(&self.model)
            .chain(&self.model.fallbacks)
            .enumerate()
        {
            if let Some((key, needed)) = m.key() {
                if needed && i == 0 {
                    required.push(key.to_string());
                } else {
                    optional.push(key.to_string());
                }
            }
        }
        required.sort();
        required.dedup();
        optional.sort();
        optional.dedup();
        optional.retain(|o| !required.contains(o));
        (required, optional)
    }

    /// The image reference this build produces: `[registry/]agent_id:tag`.
    pub fn image_tag(&self, registry: Option<&str>, tag: Option<&str>) -> String {
        if let Some(t) = tag {
            if t.contains(':') || t.contains('/') {
                return t.to_string();
            }
        }
        let tag = tag.unwrap_or(&self.version);
        match registry
            .map(|r| r.trim_end_matches('/'))
            .filter(|r| !r.is_empty())
        {
            Some(r) => format!("{r}/{}:{tag}", self.agent_id),
            None => format!("{}:{tag}", self.agent_id),
        }
    }

    /// Checks the strings that are pasted into the Dockerfile and the manifests.
    pub fn validate(&self) -> Result<(), BuildError> {
        let config = self.config_path.display().to_string();
        if !is_dns_label(&self.agent_id) {
            return Err(BuildError::invalid(
                &config,
                "agent_id",
                format!("`{}` cannot name an image and Kubernetes objects", self.agent_id),
                "use lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters (e.g. `research-agent`)",
            ));
        }
        if !is_image_tag(&self.version) {
            return Err(BuildError::invalid(
                &config,
                "version",
                format!("`{}` is not a valid image tag", self.version),
                "use letters, digits, '.', '_' and '-', not starting with '.' or '-', at most 128 characters (e.g. `1.2.0`)",
            ));
        }
        // `egress.mode` needs no check here: an `EgressMode` is one of the three modes (forge.yaml
        // parsing refuses any other word, naming the known ones).
        for p in &self.apt_packages {
            if !is_apt_package(&p.name) {
                let file = self
                    .skills
                    .iter()
                    .find(|s| s.name == p.skill)
                    .map(|s| s.file.clone())
                    .unwrap_or_else(|| p.skill.clone());
                return Err(BuildError::invalid(
                    &file,
                    &format!("metadata.forge.requires.bins[{}].apt", p.bin),
                    format!("`{}` is not a Debian package name", p.name),
                    "name one Debian package (lowercase letters, digits, '+', '-', '.'), optionally `=version`",
                ));
            }
        }
        for name in self.env.required.iter().chain(&self.env.optional) {
            if !is_env_name(name) {
                return Err(BuildError::invalid(
                    &config,
                    "requires.env",
                    format!("`{name}` is not a valid environment variable name"),
                    "use letters, digits and '_', not starting with a digit",
                ));
            }
        }
        Ok(())
    }
}

/// Appends `item` unless already present.
pub(crate) fn push_unique(v: &mut Vec<String>, item: String) {
    if !v.contains(&item) {
        v.push(item);
    }
}

/// RFC 1123 label: what Kubernetes accepts as a Deployment/Service name and docker as a repo name.
pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Docker tag grammar: `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`.
pub(crate) fn is_image_tag(s: &str) -> bool {
    let mut bytes = s.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() || b == b'_' => {}
        _ => return false,
    }
    s.len() <= 128 && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// Debian package name (policy 5.6.1), optionally `=version`.
pub(crate) fn is_apt_package(s: &str) -> bool {
    let (name, version) = match s.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (s, None),
    };
    let name_ok = name.len() >= 2
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.')
        });
    let version_ok = version.is_none_or(|v| {
        !v.is_empty()
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'~' | b':' | b'-'))
    });
    name_ok && version_ok
}

/// POSIX-ish environment variable name.
pub(crate) fn is_env_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_pasted_into_files_are_checked() {
        assert!(is_dns_label("research-agent"));
        assert!(!is_dns_label("Research"));
        assert!(!is_dns_label("a b"));
        assert!(!is_dns_label("-x"));
        assert!(!is_dns_label(&"a".repeat(64)));
        assert!(is_image_tag("1.2.0"));
        assert!(!is_image_tag(".1"));
        assert!(!is_image_tag("1.0 && rm"));
        assert!(is_apt_package("jq"));
        assert!(is_apt_package("libfoo1=1.2-3+deb12u1"));
        assert!(!is_apt_package("jq; curl evil"));
        assert!(!is_apt_package("JQ"));
        assert!(!is_apt_package("jq \\\n&& rm"));
        assert!(is_env_name("OPENAI_API_KEY"));
        assert!(!is_env_name("1X"));
        assert!(!is_env_name("A-B"));
    }

    #[test]
    fn model_domains_and_image_tags() {
        let mut spec = BuildSpec {
            agent_id: "a".into(),
            version: "1.0".into(),
            ..Default::default()
        };
        spec.model.provider = Some("openai".into());
        assert_eq!(spec.model_domains(), vec!["api.openai.com"]);
        spec.model.base_url = Some("http://Ollama.internal:11434/v1".into());
        assert_eq!(spec.model_domains(), vec!["ollama.internal:11434"]);
        spec.egress.mode = EgressMode::DenyAll;
        spec.egress.allowed_domains = vec!["example.com".into()];
        assert_eq!(spec.all_domains(), vec!["ollama.internal:11434"]);
        spec.egress.mode = EgressMode::Allowlist;
        assert_eq!(
            spec.all_domains(),
            vec!["example.com", "ollama.internal:11434"]
        );
        spec.model.fallbacks = vec![ModelSpec {
            provider: Some("anthropic".into()),
            ..Default::default()
        }];
        assert_eq!(
            spec.model_domains(),
            vec!["ollama.internal:11434", "api.anthropic.com"]
        );
        assert_eq!(
            spec.env_names(),
            (
                vec![],
                vec![
                    "ANTHROPIC_API_KEY".to_string(),
                    "OPENAI_API_KEY".to_string()
                ]
            )
        );
        assert_eq!(spec.image_tag(None, None), "a:1.0");
        assert_eq!(
            spec.image_tag(Some("ghcr.io/org/"), None),
            "ghcr.io/org/a:1.0"
        );
        assert_eq!(spec.image_tag(Some("r"), Some("dev")), "r/a:dev");
        assert_eq!(spec.image_tag(Some("r"), Some("x/y:z")), "x/y:z");
    }
}
