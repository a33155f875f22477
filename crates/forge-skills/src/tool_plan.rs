//! Which tools an agent gets, and why: the tool plan, a view derived from forge.yaml and the
//! active skills, next to the browser and `cli_execute` views. forge-runtime's assembly builds
//! exactly the tools the plan names; `forge build` writes the plan into agent.json. Neither decides
//! on its own.
//!
//! Rules, in order:
//! 1. the builtins ([`BUILTIN_TOOLS`]) every agent gets;
//! 2. `cli_execute` from forge.yaml `tools[cli_execute]`, else from the skills' (non-shell) binaries;
//! 3. one tool per `## Tool: x` section whose script exists: `<skill dir>/scripts/x.{sh,py,js}`
//!    (or `x` with `-` for `_`), where `x` must be a plain file name ([`script_for`]); a section
//!    that only documents a tool already planned (e.g. `cli_execute` usage) adds nothing; a second
//!    tool with a name already taken is absent;
//! 4. the browser tools ([`crate::BROWSER_TOOLS`]) when a skill declares `browser`;
//! 5. forge.yaml `tools` entries naming something forge does not provide: absent;
//! 6. `denied_tools` (forge.yaml and skills) last: any tool can be denied. When every browser
//!    tool is denied, the browser is not needed ([`ToolPlan::browser`] is `None`): no Chromium,
//!    no proxy for it.
//!
//! What the plan cannot know stays with the runtime: whether a script's interpreter is installed
//! on this machine's PATH, and whether `cli_execute`'s configuration is valid.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::aggregate::BrowserView;
use crate::skill::BROWSER_TOOLS;
use crate::Agent;

/// The builtins every agent gets (forge-tools implements them; forge-runtime's tests check that
/// this list is exactly what forge-tools builds).
pub const BUILTIN_TOOLS: &[&str] = &[
    "http_request",
    "web_fetch",
    "file_create",
    "datetime_now",
    "json_parse",
    "math_calculate",
];

/// The tool that runs the skills' binaries.
pub const CLI_TOOL: &str = "cli_execute";

/// Script extensions a `## Tool:` section binds to, in lookup order (forge-tools resolves an
/// interpreter for each; forge-runtime's tests check the two lists agree).
pub const SCRIPT_EXTENSIONS: &[&str] = &["sh", "py", "js"];

/// Where a tool comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolSource {
    /// Always registered.
    Builtin,
    /// `cli_execute`.
    Cli,
    /// A skill's script.
    SkillScript,
    /// A browser tool.
    Browser,
    /// Named in forge.yaml `tools` but not something forge provides.
    Config,
    /// A tool of an MCP server of forge.yaml `mcp.servers` (`<server>__<tool>`); known only once
    /// the server is reached, so the plan itself never holds one.
    Mcp,
}

/// The script behind a skill tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScriptBinding {
    /// The skill whose `## Tool:` section it is.
    pub skill: String,
    /// The script file (inside `<skill dir>/scripts`).
    pub script: PathBuf,
    /// The skill's directory (the script's working directory).
    pub dir: PathBuf,
}

/// Where `cli_execute`'s configuration comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CliSource {
    /// forge.yaml `tools: [{name: cli_execute, config: ...}]`.
    Configured,
    /// The skills' `requires.bins` (shells removed): these binaries.
    Derived(Vec<String>),
}

/// One tool the plan considered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedTool {
    pub name: String,
    pub source: ToolSource,
    /// Whether the agent gets it.
    pub present: bool,
    /// One sentence: the condition that put it there or kept it out.
    pub reason: String,
    /// For a skill script tool that has a script: which one (also kept when denied).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<ScriptBinding>,
}

/// The agent's tool plan (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolPlan {
    /// Every tool considered, in plan order: builtins, `cli_execute`, skill scripts, browser
    /// tools, forge.yaml entries forge does not provide.
    pub tools: Vec<PlannedTool>,
    /// `cli_execute`'s source, when it is present (not denied).
    pub cli: Option<CliSource>,
    /// The browser view, when the browser is needed: a skill declares `browser` and at least one
    /// browser tool survives `denied_tools`.
    pub browser: Option<BrowserView>,
    /// Skills that declare `browser` even though every browser tool is denied (the browser is
    /// then not started; said once at startup).
    pub browser_denied_for: Vec<String>,
}

impl ToolPlan {
    /// The plan entry for `name`, if the plan considered it.
    pub fn get(&self, name: &str) -> Option<&PlannedTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Whether `name` is planned and present.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some_and(|t| t.present)
    }

    /// The present tools, in plan order.
    pub fn present(&self) -> impl Iterator<Item = &PlannedTool> {
        self.tools.iter().filter(|t| t.present)
    }
}

/// The script that implements tool `tool` of a skill whose directory is `skill_dir`, if any:
/// `scripts/<tool>.{sh,py,js}`, then the same with `-` for `_`. The tool name comes from a
/// SKILL.md heading, so it must be a plain file name: empty names, names starting with `.`, and
/// names containing `/`, `\` or NUL never match (`../x` would run a file outside the skill,
/// past discovery's symlink check).
pub fn script_for(skill_dir: &Path, tool: &str) -> Option<PathBuf> {
    if !is_plain_tool_name(tool) {
        return None;
    }
    let scripts = skill_dir.join("scripts");
    let dashed = tool.replace('_', "-");
    let stems: &[&str] = if dashed == tool {
        &[tool]
    } else {
        &[tool, &dashed]
    };
    for stem in stems {
        for ext in SCRIPT_EXTENSIONS {
            let p = scripts.join(format!("{stem}.{ext}"));
            if std::fs::metadata(&p).is_ok_and(|m| m.is_file()) {
                return Some(p);
            }
        }
    }
    None
}

/// A name that can only name a file directly inside `scripts/`.
pub fn is_plain_tool_name(tool: &str) -> bool {
    !tool.is_empty() && !tool.starts_with('.') && !tool.contains(['/', '\\', '\0'])
}

/// Whether `name` has the form of an MCP tool, `<server>__<tool>` with a valid server slug. The
/// form is reserved: a skill script tool named like that is not registered, so the audit log can
/// tell MCP calls (`mcp_tool_call`) from the rest by name.
pub fn is_mcp_tool_name(name: &str) -> bool {
    name.split_once("__")
        .is_some_and(|(server, tool)| !tool.is_empty() && crate::mcp::is_valid_server_name(server))
}

/// `path` relative to `base` when inside it, for messages that stay the same on every machine.
fn shown(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}

impl Agent {
    /// The agent's tool plan (see [`ToolPlan`]).
    pub fn tool_plan(&self) -> ToolPlan {
        let mut tools: Vec<PlannedTool> = BUILTIN_TOOLS
            .iter()
            .map(|t| PlannedTool {
                name: t.to_string(),
                source: ToolSource::Builtin,
                present: true,
                reason: "builtin: every agent gets it".into(),
                script: None,
            })
            .collect();

        // 2. cli_execute.
        let view = self.aggregate.cli_view();
        let cli = if let Some(entry) = self.config.tools.iter().find(|t| t.name == CLI_TOOL) {
            let bins = entry
                .config
                .get("allowed_binaries")
                .map(|v| match v {
                    serde_json::Value::Array(items) => items
                        .iter()
                        .filter_map(|i| i.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    serde_json::Value::String(s) => s
                        .split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .collect::<Vec<_>>()
                        .join(", "),
                    _ => String::new(),
                })
                .unwrap_or_default();
            tools.push(PlannedTool {
                name: CLI_TOOL.into(),
                source: ToolSource::Cli,
                present: true,
                reason: format!("forge.yaml tools[cli_execute]: allowed binaries {bins}"),
                script: None,
            });
            Some(CliSource::Configured)
        } else if !view.allowed_binaries.is_empty() {
            tools.push(PlannedTool {
                name: CLI_TOOL.into(),
                source: ToolSource::Cli,
                present: true,
                reason: format!(
                    "derived from the skills' requires.bins (shells removed): {}",
                    view.allowed_binaries.join(", ")
                ),
                script: None,
            });
            Some(CliSource::Derived(view.allowed_binaries.clone()))
        } else {
            tools.push(PlannedTool {
                name: CLI_TOOL.into(),
                source: ToolSource::Cli,
                present: false,
                reason:
                    "no tools[cli_execute] in forge.yaml and no skill requires a (non-shell) binary"
                        .into(),
                script: None,
            });
            None
        };

        // 3. Skill scripts. The browser tools' names are taken when a skill asks for the browser.
        let browser_view = self.aggregate.browser_view();
        let taken_by_browser = |name: &str| browser_view.is_some() && BROWSER_TOOLS.contains(&name);
        for skill in &self.skills {
            for section in &skill.tools {
                let name = section.name.clone();
                let already =
                    tools.iter().any(|t| t.present && t.name == name) || taken_by_browser(&name);
                let script = skill.dir.as_ref().and_then(|d| {
                    script_for(d, &section.name).map(|p| ScriptBinding {
                        skill: skill.name.clone(),
                        script: p,
                        dir: d.clone(),
                    })
                });
                let (present, reason) = match (&skill.dir, &script) {
                    // A section documenting a tool forge already has is not an absence.
                    (_, None) if already => continue,
                    (None, _) => (
                        false,
                        format!(
                            "skill {} is embedded and has no scripts directory",
                            skill.name
                        ),
                    ),
                    (Some(_), None) if !is_plain_tool_name(&section.name) => (
                        false,
                        format!(
                            "skill {}: `## Tool: {}` is not a plain file name, so no script can back it; name the tool like its script (letters, digits, `_`, `-`)",
                            skill.name, section.name
                        ),
                    ),
                    (Some(_), None) => (
                        false,
                        format!(
                            "skill {}: no script for ## Tool: {} (looked for scripts/{}.{{{}}}); the section is instructions only",
                            skill.name,
                            section.name,
                            section.name,
                            SCRIPT_EXTENSIONS.join(",")
                        ),
                    ),
                    (Some(_), Some(_)) if already => (
                        false,
                        format!(
                            "skill {}: a tool named {} is already registered; rename the tool section",
                            skill.name, section.name
                        ),
                    ),
                    (Some(_), Some(b)) => (
                        true,
                        format!(
                            "skill {}: ## Tool: {} -> {}",
                            skill.name,
                            section.name,
                            shown(&b.script, &self.dir)
                        ),
                    ),
                };
                tools.push(PlannedTool {
                    name,
                    source: ToolSource::SkillScript,
                    present,
                    reason,
                    script,
                });
            }
        }

        // 4. Browser tools.
        let browser_reason = match &browser_view {
            Some(v) => format!(
                "browser: skill(s) {} declare requires.capabilities: [browser]",
                v.skills.join(", ")
            ),
            None => BROWSER_ABSENT_REASON.to_string(),
        };
        for name in BROWSER_TOOLS {
            tools.push(PlannedTool {
                name: name.to_string(),
                source: ToolSource::Browser,
                present: browser_view.is_some(),
                reason: browser_reason.clone(),
                script: None,
            });
        }

        // 5. forge.yaml entries forge does not provide.
        for t in &self.config.tools {
            if !tools.iter().any(|p| p.name == t.name) {
                tools.push(PlannedTool {
                    name: t.name.clone(),
                    source: ToolSource::Config,
                    present: false,
                    reason: format!(
                        "listed in forge.yaml tools but forge has no such tool (builtins: {}, cli_execute)",
                        BUILTIN_TOOLS.join(", ")
                    ),
                    script: None,
                });
            }
        }

        // 6. denied_tools, last.
        for name in &self.denied_tools() {
            let who = denied_by(self, name);
            for t in tools.iter_mut().filter(|t| &t.name == name && t.present) {
                t.present = false;
                t.reason = format!("denied by denied_tools of {who} (was: {})", t.reason);
            }
        }

        let cli = cli.filter(|_| {
            tools
                .iter()
                .any(|t| t.present && t.source == ToolSource::Cli)
        });
        let any_browser_tool = tools
            .iter()
            .any(|t| t.present && t.source == ToolSource::Browser);
        let (browser, browser_denied_for) = match browser_view {
            Some(v) if any_browser_tool => (Some(v), Vec::new()),
            Some(v) => (None, v.skills),
            None => (None, Vec::new()),
        };
        ToolPlan {
            tools,
            cli,
            browser,
            browser_denied_for,
        }
    }
}

/// Why browser tools are absent when no skill asks for them.
pub const BROWSER_ABSENT_REASON: &str = "no active skill declares requires.capabilities: [browser]";

/// Who denied `tool`: "forge.yaml" and/or "skill(s) a, b" (also for tools the plan cannot know,
/// such as MCP servers' tools).
pub fn denied_by(agent: &Agent, tool: &str) -> String {
    let skills: Vec<&str> = agent
        .skills
        .iter()
        .filter(|s| {
            s.forge
                .as_ref()
                .is_some_and(|f| f.denied_tools.iter().any(|d| d == tool))
        })
        .map(|s| s.name.as_str())
        .collect();
    let mut who = Vec::new();
    if agent.config.denied_tools.iter().any(|d| d == tool) {
        who.push("forge.yaml".to_string());
    }
    if !skills.is_empty() {
        who.push(format!("skill(s) {}", skills.join(", ")));
    }
    who.join(" and ")
}
