//! The tools an agent will register, with the reason for each conditional one, for agent.json.
//!
//! The decision is forge-skills' tool plan ([`forge_skills::ToolPlan`], from
//! `Agent::tool_plan`), the same value forge-runtime's assembly builds its registry from; this
//! module only turns it into agent.json's shape. The build cannot see the image's PATH, so a
//! skill script counts as registered when its file exists (the runtime also needs its
//! interpreter, which the image installs).

use serde::Serialize;

use crate::spec::BuildSpec;

/// Builtins every agent gets.
pub use forge_skills::BUILTIN_TOOLS;

/// The browser tool family, registered only for agents with the `browser` capability.
pub use forge_skills::BROWSER_TOOLS;

/// One tool and whether it registers.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PlannedTool {
    pub name: String,
    /// `builtin`, `cli`, `skill-script`, `browser` or `configured` (named in forge.yaml but not
    /// a tool forge provides: never registered).
    pub kind: &'static str,
    #[serde(skip)]
    pub registered: bool,
    /// Why a conditional tool is present or absent (`None` for builtins that are present).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// agent.json's view of the spec's tool plan.
pub fn documented_tool_plan(spec: &BuildSpec) -> Vec<PlannedTool> {
    use forge_skills::ToolSource;
    spec.tool_plan
        .tools
        .iter()
        .map(|t| PlannedTool {
            name: t.name.clone(),
            kind: match t.source {
                ToolSource::Builtin => "builtin",
                ToolSource::Cli => "cli",
                ToolSource::SkillScript => "skill-script",
                ToolSource::Browser => "browser",
                ToolSource::Config => "configured",
                ToolSource::Mcp => "mcp",
            },
            registered: t.present,
            reason: (t.source != ToolSource::Builtin || !t.present).then(|| t.reason.clone()),
        })
        .collect()
}
