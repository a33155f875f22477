//! forge.yaml `mcp.servers`: MCP servers whose tools the agent gets as `<server>__<tool>`.
//!
//! The block is compatible with initializ/forge's. It is read from the position-keeping YAML tree
//! (not through serde) so that every problem points at its entry: a bad name, a missing
//! `tools.allow`, a missing `url` (http) or `command` (stdio), an unknown transport, a duplicate
//! name, a bad timeout. Whether a required server's `auth.token_env` is set is checked separately
//! ([`crate::ForgeConfig::check_mcp_env`]) because `forge build` and `forge skills audit` read the
//! same file on machines that do not hold the token.
//!
//! Timeouts are written as Go-style durations made of `<number><unit>` parts with the units `ms`,
//! `s`, `m` and `h` (`60s`, `2m`, `1m30s`, `1.5s`, `1500ms`); a bare number is refused (its unit
//! would be a guess). The value must be at least 1 s and at most 1 h.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration::parse_duration;
use crate::skill::suggest;
use crate::yaml::{Doc, Kind, Node, Seg};
use crate::SourceDiagnostic;

/// Default per-server time limit.
pub const MCP_DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Shortest accepted `timeout`.
pub const MCP_MIN_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest accepted `timeout`.
pub const MCP_MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// `mcp`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpConfig {
    #[serde(default)]
    pub servers: Vec<McpServer>,
}

/// How forge talks to an MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpTransport {
    /// Streamable HTTP at `url`, through forge's egress client.
    Http,
    /// A child process speaking MCP on stdin/stdout (forge only; not in initializ/forge).
    Stdio,
}

impl McpTransport {
    pub fn as_str(&self) -> &'static str {
        match self {
            McpTransport::Http => "http",
            McpTransport::Stdio => "stdio",
        }
    }
}

/// `auth.type`: both send `Authorization: Bearer <token>` (`static` is initializ/forge's name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpAuthKind {
    Bearer,
    Static,
}

/// `auth`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpAuth {
    #[serde(rename = "type")]
    pub kind: McpAuthKind,
    /// The environment variable holding the token (never the token itself).
    pub token_env: String,
}

/// `tools`: which of the server's tools the agent gets. `allow` is required; `["*"]` means all.
/// `deny` wins over `allow`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpToolFilter {
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

impl McpToolFilter {
    /// Whether the server's tool `name` (without the `<server>__` prefix) is let through.
    pub fn allows(&self, name: &str) -> bool {
        if self.deny.iter().any(|d| d == name) {
            return false;
        }
        self.allow.iter().any(|a| a == "*" || a == name)
    }
}

/// An entry of `mcp.servers`. After a successful parse, `url` is set for `http` and `command` for
/// `stdio`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServer {
    /// Slug `^[a-z][a-z0-9-]{0,30}$`; the tools become `<name>__<tool>`.
    pub name: String,
    pub transport: McpTransport,
    /// `http`: the streamable HTTP endpoint (`http://` or `https://`).
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub auth: Option<McpAuth>,
    pub tools: McpToolFilter,
    /// Time limit per request to this server (connect, list, call).
    #[serde(with = "crate::duration::text")]
    pub timeout: Duration,
    /// `true`: the agent does not start when this server cannot be reached or lists no tools.
    #[serde(default)]
    pub required: bool,
    /// `stdio`: the program to run.
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// `stdio`: names of environment variables passed through (nothing else is).
    #[serde(default)]
    pub env: Vec<String>,
}

impl McpServer {
    /// The name a tool of this server is registered under: `<server>__<tool>`.
    pub fn tool_name(&self, tool: &str) -> String {
        format!("{}__{}", self.name, tool)
    }
}

/// Whether `name` is a valid server slug: `^[a-z][a-z0-9-]{0,30}$`.
pub fn is_valid_server_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 31
        && b[0].is_ascii_lowercase()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

const SERVER_KEYS: &[&str] = &[
    "name",
    "transport",
    "url",
    "auth",
    "tools",
    "timeout",
    "required",
    "command",
    "args",
    "env",
];
const TRANSPORTS: &[&str] = &["http", "stdio"];
const AUTH_TYPES: &[&str] = &["bearer", "static"];

/// Read `mcp` from the marked tree: the config (when the block has no errors), the errors and the
/// warnings (unknown keys).
pub(crate) fn read(doc: &Doc<'_>) -> (McpConfig, Vec<SourceDiagnostic>, Vec<SourceDiagnostic>) {
    let mut r = Reader {
        doc,
        errors: Vec::new(),
        warnings: Vec::new(),
    };
    let cfg = r.config();
    (cfg, r.errors, r.warnings)
}

struct Reader<'d, 'a> {
    doc: &'d Doc<'a>,
    errors: Vec<SourceDiagnostic>,
    warnings: Vec<SourceDiagnostic>,
}

impl Reader<'_, '_> {
    fn err(&mut self, code: &'static str, msg: String, at: &[Seg<'_>], label: &str, help: String) {
        self.errors
            .push(self.doc.diag(code, msg, at, label, Some(help)));
    }

    fn unknown_keys(&mut self, node: &Node, known: &[&str], where_: &str) {
        for (key, key_node) in node.map_keys() {
            if known.contains(&key) {
                continue;
            }
            let d = self.doc.key_diag(
                "forge::config::unknown-key",
                format!("unknown key `{key}` in forge.yaml `{where_}`; it is ignored"),
                key_node,
                "unknown key",
                Some(format!(
                    "known keys here: {}{}",
                    known.join(", "),
                    suggest(key, known)
                        .map(|s| format!(" (did you mean `{s}`?)"))
                        .unwrap_or_default()
                )),
            );
            self.warnings.push(d.warning());
        }
    }

    /// A scalar at `at` (None when absent); a non-scalar is an error.
    fn scalar(&mut self, at: &[Seg<'_>], what: &str) -> Option<String> {
        let node = self.doc.tree.get(at)?;
        match &node.kind {
            Kind::Scalar(s) => Some(s.clone()),
            _ => {
                self.err(
                    "forge::config::mcp-type",
                    format!("forge.yaml `{what}` must be a single value"),
                    at,
                    "expected a scalar",
                    format!(
                        "write `{}: <value>`",
                        what.rsplit('.').next().unwrap_or(what)
                    ),
                );
                None
            }
        }
    }

    /// A list of scalars at `at` (None when absent).
    fn list(&mut self, at: &[Seg<'_>], what: &str) -> Option<Vec<String>> {
        let node = self.doc.tree.get(at)?;
        let Kind::Seq(items) = &node.kind else {
            self.err(
                "forge::config::mcp-type",
                format!("forge.yaml `{what}` must be a list"),
                at,
                "expected a list",
                format!(
                    "write `{}: [a, b]`",
                    what.rsplit('.').next().unwrap_or(what)
                ),
            );
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match &item.kind {
                Kind::Scalar(s) => out.push(s.clone()),
                _ => {
                    let mut p = at.to_vec();
                    p.push(Seg::Index(i));
                    self.err(
                        "forge::config::mcp-type",
                        format!("forge.yaml `{what}` entries must be plain values"),
                        &p,
                        "expected a name",
                        "write each entry as a name".into(),
                    );
                }
            }
        }
        Some(out)
    }

    fn config(&mut self) -> McpConfig {
        let Some(mcp) = self.doc.tree.get(&[Seg::Key("mcp")]) else {
            return McpConfig::default();
        };
        if matches!(&mcp.kind, Kind::Scalar(s) if s.is_empty()) {
            return McpConfig::default();
        }
        if !matches!(mcp.kind, Kind::Map(_)) {
            self.err(
                "forge::config::mcp-type",
                "forge.yaml `mcp` must be a mapping with `servers`".into(),
                &[Seg::Key("mcp")],
                "expected a mapping",
                "write `mcp:` then `  servers:` and a list of servers (see docs/mcp.md)".into(),
            );
            return McpConfig::default();
        }
        self.unknown_keys(mcp, &["servers"], "mcp");
        let Some(servers) = self.doc.tree.get(&[Seg::Key("mcp"), Seg::Key("servers")]) else {
            return McpConfig::default();
        };
        let items = match &servers.kind {
            Kind::Seq(items) => items.len(),
            Kind::Scalar(s) if s.is_empty() => 0,
            _ => {
                self.err(
                    "forge::config::mcp-type",
                    "forge.yaml `mcp.servers` must be a list of servers".into(),
                    &[Seg::Key("mcp"), Seg::Key("servers")],
                    "expected a list",
                    "write each server as `- name: ...` (see docs/mcp.md)".into(),
                );
                return McpConfig::default();
            }
        };
        let mut out: Vec<McpServer> = Vec::new();
        let mut seen: Vec<(String, usize)> = Vec::new();
        for i in 0..items {
            let before = self.errors.len();
            let server = self.server(i);
            if let Some(s) = &server {
                if let Some((_, first)) = seen.iter().find(|(n, _)| *n == s.name) {
                    let first = *first;
                    self.err(
                        "forge::config::mcp-duplicate",
                        format!(
                            "duplicate MCP server name \"{}\" (entries {} and {} of mcp.servers)",
                            s.name,
                            first + 1,
                            i + 1
                        ),
                        &[
                            Seg::Key("mcp"),
                            Seg::Key("servers"),
                            Seg::Index(i),
                            Seg::Key("name"),
                        ],
                        "second server with this name",
                        "give each server its own name: the name prefixes its tools (`<name>__<tool>`)"
                            .into(),
                    );
                }
                seen.push((s.name.clone(), i));
            }
            if let (Some(s), true) = (server, self.errors.len() == before) {
                out.push(s);
            }
        }
        McpConfig { servers: out }
    }

    fn server(&mut self, i: usize) -> Option<McpServer> {
        let base = [Seg::Key("mcp"), Seg::Key("servers"), Seg::Index(i)];
        let at = |k: &'static str| [base[0], base[1], base[2], Seg::Key(k)];
        let node = self.doc.tree.get(&base)?;
        if !matches!(node.kind, Kind::Map(_)) {
            self.err(
                "forge::config::mcp-type",
                format!(
                    "entry {} of forge.yaml `mcp.servers` is not a mapping",
                    i + 1
                ),
                &base,
                "expected `name: ...`, `transport: ...`",
                "write each server as a mapping (see docs/mcp.md)".into(),
            );
            return None;
        }
        self.unknown_keys(node, SERVER_KEYS, "mcp.servers[]");
        let start = self.errors.len();

        // name
        let name = self.scalar(&at("name"), "mcp.servers[].name");
        let name = match name {
            None => {
                self.err(
                    "forge::config::mcp-name",
                    format!("entry {} of mcp.servers has no `name`", i + 1),
                    &base,
                    "this server",
                    "add `name: <slug>` (lowercase letters, digits and `-`, starting with a letter); its tools become `<name>__<tool>`".into(),
                );
                String::new()
            }
            Some(n) if !is_valid_server_name(&n) => {
                self.err(
                    "forge::config::mcp-name",
                    format!("MCP server name \"{n}\" is not a valid slug (^[a-z][a-z0-9-]{{0,30}}$)"),
                    &at("name"),
                    "not a slug",
                    "use 1 to 31 lowercase letters, digits and `-`, starting with a letter (e.g. `linear`); the tools become `<name>__<tool>`".into(),
                );
                n
            }
            Some(n) => n,
        };
        let shown = if name.is_empty() {
            format!("entry {}", i + 1)
        } else {
            format!("\"{name}\"")
        };

        // transport
        let transport = match self.scalar(&at("transport"), "mcp.servers[].transport") {
            None => {
                if self.doc.tree.get(&at("transport")).is_none() {
                    self.err(
                        "forge::config::mcp-transport",
                        format!("MCP server {shown} has no `transport`"),
                        &at("name"),
                        "this server",
                        "add `transport: http` (with `url`) or `transport: stdio` (with `command`)"
                            .into(),
                    );
                }
                None
            }
            Some(t) => match t.as_str() {
                "http" => Some(McpTransport::Http),
                "stdio" => Some(McpTransport::Stdio),
                other => {
                    self.err(
                        "forge::config::mcp-transport",
                        format!(
                            "unknown MCP transport \"{other}\" for server {shown} (known: {})",
                            TRANSPORTS.join(", ")
                        ),
                        &at("transport"),
                        "unknown transport",
                        format!(
                            "use `http` (streamable HTTP at `url`) or `stdio` (a `command` forge starts){}",
                            suggest(other, TRANSPORTS)
                                .map(|s| format!(" (did you mean `{s}`?)"))
                                .unwrap_or_default()
                        ),
                    );
                    None
                }
            },
        };

        // url / command
        let url = self.scalar(&at("url"), "mcp.servers[].url");
        let command = self.scalar(&at("command"), "mcp.servers[].command");
        match transport {
            Some(McpTransport::Http) => match &url {
                None => self.err(
                    "forge::config::mcp-url",
                    format!("MCP server {shown} uses transport http but has no `url`"),
                    &at("transport"),
                    "http needs a url",
                    "add `url: https://host/mcp` (the server's streamable HTTP endpoint)".into(),
                ),
                Some(u) => {
                    let lower = u.trim().to_ascii_lowercase();
                    if !(lower.starts_with("https://") || lower.starts_with("http://"))
                        || lower
                            .trim_start_matches("https://")
                            .trim_start_matches("http://")
                            .is_empty()
                    {
                        self.err(
                            "forge::config::mcp-url",
                            format!(
                                "MCP server {shown}: url \"{u}\" is not an http:// or https:// URL"
                            ),
                            &at("url"),
                            "not an http(s) URL",
                            "write the full endpoint, e.g. `https://mcp.example.com/mcp`".into(),
                        );
                    }
                }
            },
            Some(McpTransport::Stdio) if command.as_deref().is_none_or(|c| c.trim().is_empty()) => {
                self.err(
                        "forge::config::mcp-command",
                        format!("MCP server {shown} uses transport stdio but has no `command`"),
                        &at("transport"),
                        "stdio needs a command",
                        "add `command: <program>` (and `args: [...]`); forge starts it with a cleared environment".into(),
                    );
            }
            _ => {}
        }
        let args = self
            .list(&at("args"), "mcp.servers[].args")
            .unwrap_or_default();
        let env = self
            .list(&at("env"), "mcp.servers[].env")
            .unwrap_or_default();

        // auth
        let auth = self.auth(&base, &shown);

        // tools
        let tools_at = at("tools");
        let tools = match self.doc.tree.get(&tools_at) {
            Some(n) if matches!(n.kind, Kind::Map(_)) => {
                self.unknown_keys(n, &["allow", "deny"], "mcp.servers[].tools");
                let allow_at = [
                    base[0],
                    base[1],
                    base[2],
                    Seg::Key("tools"),
                    Seg::Key("allow"),
                ];
                let deny_at = [
                    base[0],
                    base[1],
                    base[2],
                    Seg::Key("tools"),
                    Seg::Key("deny"),
                ];
                let allow = self.list(&allow_at, "mcp.servers[].tools.allow");
                let deny = self
                    .list(&deny_at, "mcp.servers[].tools.deny")
                    .unwrap_or_default();
                match allow {
                    Some(allow) => Some(McpToolFilter { allow, deny }),
                    None => {
                        if self.doc.tree.get(&allow_at).is_none() {
                            self.missing_allow(&tools_at, &shown);
                        }
                        None
                    }
                }
            }
            Some(_) => {
                self.err(
                    "forge::config::mcp-type",
                    format!("MCP server {shown}: `tools` must be a mapping with `allow`"),
                    &tools_at,
                    "expected a mapping",
                    "write `tools: { allow: [tool_a, tool_b] }` (`[\"*\"]` for all)".into(),
                );
                None
            }
            None => {
                self.missing_allow(&base, &shown);
                None
            }
        };

        // timeout
        let timeout = match self.scalar(&at("timeout"), "mcp.servers[].timeout") {
            None => MCP_DEFAULT_TIMEOUT,
            Some(t) => match parse_duration(&t) {
                Ok(d) if d < MCP_MIN_TIMEOUT => {
                    self.err(
                        "forge::config::mcp-timeout",
                        format!("MCP server {shown}: timeout {t} is shorter than 1s"),
                        &at("timeout"),
                        "too short",
                        "use at least `1s` (the default is `60s`)".into(),
                    );
                    MCP_DEFAULT_TIMEOUT
                }
                Ok(d) if d > MCP_MAX_TIMEOUT => {
                    self.err(
                        "forge::config::mcp-timeout",
                        format!("MCP server {shown}: timeout {t} is longer than 1h"),
                        &at("timeout"),
                        "too long",
                        "use at most `1h` (the default is `60s`)".into(),
                    );
                    MCP_DEFAULT_TIMEOUT
                }
                Ok(d) => d,
                Err(why) => {
                    self.err(
                        "forge::config::mcp-timeout",
                        format!("MCP server {shown}: invalid timeout: {why}"),
                        &at("timeout"),
                        "not a duration",
                        "write a duration with a unit: `60s`, `2m`, `1m30s`, `1500ms`".into(),
                    );
                    MCP_DEFAULT_TIMEOUT
                }
            },
        };

        // required
        let required = match self.scalar(&at("required"), "mcp.servers[].required") {
            None => false,
            Some(v) => {
                match v.as_str() {
                    "true" => true,
                    "false" => false,
                    other => {
                        self.err(
                        "forge::config::mcp-type",
                        format!("MCP server {shown}: `required` must be true or false, not \"{other}\""),
                        &at("required"),
                        "expected true or false",
                        "write `required: true` or `required: false` (the default)".into(),
                    );
                        false
                    }
                }
            }
        };

        if self.errors.len() > start {
            // Return what identifies the server (for the duplicate check); the caller drops it.
            return (!name.is_empty()).then(|| McpServer {
                name,
                transport: transport.unwrap_or(McpTransport::Http),
                url,
                auth,
                tools: tools.unwrap_or_default(),
                timeout,
                required,
                command,
                args,
                env,
            });
        }
        Some(McpServer {
            name,
            transport: transport?,
            url,
            auth,
            tools: tools?,
            timeout,
            required,
            command,
            args,
            env,
        })
    }

    fn missing_allow(&mut self, at: &[Seg<'_>], shown: &str) {
        self.err(
            "forge::config::mcp-allow",
            format!("MCP server {shown} has no `tools.allow`: forge registers none of an MCP server's tools unless they are listed"),
            at,
            "tools.allow is required",
            "add `tools: { allow: [tool_a, tool_b] }` naming the tools this agent may use, or `allow: [\"*\"]` for all of them".into(),
        );
    }

    fn auth(&mut self, base: &[Seg<'_>; 3], shown: &str) -> Option<McpAuth> {
        let auth_at = [base[0], base[1], base[2], Seg::Key("auth")];
        let node = self.doc.tree.get(&auth_at)?;
        if !matches!(node.kind, Kind::Map(_)) {
            self.err(
                "forge::config::mcp-auth",
                format!("MCP server {shown}: `auth` must be a mapping"),
                &auth_at,
                "expected a mapping",
                "write `auth: { type: bearer, token_env: MY_TOKEN }`".into(),
            );
            return None;
        }
        self.unknown_keys(node, &["type", "token_env"], "mcp.servers[].auth");
        let type_at = [
            base[0],
            base[1],
            base[2],
            Seg::Key("auth"),
            Seg::Key("type"),
        ];
        let env_at = [
            base[0],
            base[1],
            base[2],
            Seg::Key("auth"),
            Seg::Key("token_env"),
        ];
        let kind = match self.scalar(&type_at, "mcp.servers[].auth.type").as_deref() {
            None | Some("bearer") => Some(McpAuthKind::Bearer),
            Some("static") => Some(McpAuthKind::Static),
            Some("none") => return None,
            Some(other) => {
                self.err(
                    "forge::config::mcp-auth",
                    format!(
                        "unknown auth type \"{other}\" for MCP server {shown} (known: {})",
                        AUTH_TYPES.join(", ")
                    ),
                    &type_at,
                    "unknown auth type",
                    "use `bearer` (or `static`, the same); OAuth is not supported (see docs/mcp.md)"
                        .into(),
                );
                None
            }
        };
        let token_env = match self.scalar(&env_at, "mcp.servers[].auth.token_env") {
            Some(e) if is_env_name(&e) => Some(e),
            Some(e) => {
                self.err(
                    "forge::config::mcp-auth",
                    format!("MCP server {shown}: token_env \"{e}\" is not an environment variable name"),
                    &env_at,
                    "not a variable name",
                    "name the variable holding the token (letters, digits, `_`), e.g. `LINEAR_TOKEN`; never the token itself".into(),
                );
                None
            }
            None => {
                self.err(
                    "forge::config::mcp-auth",
                    format!("MCP server {shown}: `auth` has no `token_env`"),
                    &auth_at,
                    "which variable holds the token?",
                    "add `token_env: MY_TOKEN` naming the environment variable that holds the token"
                        .into(),
                );
                None
            }
        };
        Some(McpAuth {
            kind: kind?,
            token_env: token_env?,
        })
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_env_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        for ok in ["a", "linear", "my-server2", &"a".repeat(31)] {
            assert!(is_valid_server_name(ok), "{ok}");
        }
        for bad in ["", "1a", "A", "a_b", "-a", &"a".repeat(32), "a.b", "é"] {
            assert!(!is_valid_server_name(bad), "{bad}");
        }
    }

    #[test]
    fn filter_deny_wins() {
        let f = McpToolFilter {
            allow: vec!["*".into()],
            deny: vec!["rm".into()],
        };
        assert!(f.allows("ls") && !f.allows("rm"));
        let f = McpToolFilter {
            allow: vec!["a".into()],
            deny: vec![],
        };
        assert!(f.allows("a") && !f.allows("b"));
    }
}
