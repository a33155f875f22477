//! The tools an agent will register, with the reason for each conditional one, for agent.json.
//!
//! This mirrors the registration rules of forge-runtime's assembly (issue "Tool registry ..."):
//! builtins always; `cli_execute` from forge.yaml or the skills' binaries; one tool per skill
//! `## Tool:` section that has a script; the browser tools only when a skill declares
//! `browser`; `denied_tools` removes any of them. It is computed here from the build's own
//! input so the build does not start a runtime.

use serde::Serialize;

use crate::spec::BuildSpec;

/// Builtins every agent gets.
pub const BUILTIN_TOOLS: &[&str] = &[
    "http_request",
    "web_fetch",
    "file_create",
    "datetime_now",
    "json_parse",
    "math_calculate",
];

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
    /// Why a conditional tool is present or absent (`None` for unconditional builtins).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The documented registration rules applied to `spec` (see the module comment).
pub fn documented_tool_plan(spec: &BuildSpec) -> Vec<PlannedTool> {
    let mut plan: Vec<PlannedTool> = BUILTIN_TOOLS
        .iter()
        .map(|t| PlannedTool {
            name: t.to_string(),
            kind: "builtin",
            registered: true,
            reason: None,
        })
        .collect();

    let cli_reason = if spec.configured_tools.iter().any(|t| t == "cli_execute") {
        Some("configured in forge.yaml tools".to_string())
    } else if !spec.cli_binaries.is_empty() {
        Some(format!(
            "derived from the skills' bins: {}",
            spec.cli_binaries.join(", ")
        ))
    } else {
        None
    };
    plan.push(PlannedTool {
        name: "cli_execute".into(),
        kind: "cli",
        registered: cli_reason.is_some(),
        reason: Some(cli_reason.unwrap_or_else(|| {
            "not configured in forge.yaml tools and no skill declares binaries".to_string()
        })),
    });

    for skill in &spec.skills {
        for tool in &skill.tools {
            plan.push(PlannedTool {
                name: tool.name.clone(),
                kind: "skill-script",
                registered: tool.script.is_some(),
                reason: Some(match &tool.script {
                    Some(s) => format!("skill {} runs {}", skill.name, s),
                    None => format!(
                        "skill {} has a `## Tool: {}` section but no script in scripts/",
                        skill.name, tool.name
                    ),
                }),
            });
        }
    }

    let browser_reason = match &spec.browser {
        Some(b) => format!(
            "capability `browser` declared by skills: {}",
            b.skills.join(", ")
        ),
        None if spec.needs_browser() => {
            "capability `browser` declared by an active skill".to_string()
        }
        None => "no active skill declares requires.capabilities: [browser]".to_string(),
    };
    for t in BROWSER_TOOLS {
        plan.push(PlannedTool {
            name: t.to_string(),
            kind: "browser",
            registered: spec.needs_browser(),
            reason: Some(browser_reason.clone()),
        });
    }

    for t in &spec.configured_tools {
        if !plan.iter().any(|p| &p.name == t) {
            plan.push(PlannedTool {
                name: t.clone(),
                kind: "configured",
                registered: false,
                reason: Some(format!(
                    "listed in forge.yaml tools but forge has no such tool (builtins: {}, cli_execute)",
                    BUILTIN_TOOLS.join(", ")
                )),
            });
        }
    }

    for p in &mut plan {
        if spec.denied_tools.contains(&p.name) {
            p.registered = false;
            p.reason = Some("removed by denied_tools".into());
        }
    }
    plan
}
