//! Two engines in one agent: each browser tool call goes to its skill's engine.
//!
//! When an agent's browser skills use two engines (a reading skill on Lightpanda, a form skill
//! on Chromium), there is one [`BrowserManager`] per engine (each launched lazily, so sessions
//! are per task and engine) and the browser tools are [`routed_browser_tools`]: each takes an
//! optional `skill` argument (an enum of the browser skill names) and runs on that skill's
//! engine, or on the agent's default engine without it. A tool the chosen engine cannot serve
//! is an error naming the skill, the engine and the fix. With one engine none of this is used
//! (`browser_tools` as before: no `skill` argument, no extra tokens).

use std::sync::Arc;

use async_trait::async_trait;
use forge_tools::{Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{json, Value};

use crate::engine::{lacks, EngineKind};
use crate::manager::BrowserManager;
use crate::tools::{browser_tools, BrowserToolOptions};

/// The `skill` argument of a routed tool.
pub const SKILL_ARG: &str = "skill";

/// Which engine serves each browser skill, and the one used when a call names none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineRoutes {
    /// The engine of a call that names no skill.
    pub default: EngineKind,
    /// Each browser skill and its engine, in the agent's skill order.
    pub skills: Vec<(String, EngineKind)>,
}

impl EngineRoutes {
    /// The engines used (each once, chromium first): the skills' and the default.
    pub fn engines(&self) -> Vec<EngineKind> {
        [EngineKind::Chromium, EngineKind::Lightpanda]
            .into_iter()
            .filter(|e| *e == self.default || self.skills.iter().any(|(_, k)| k == e))
            .collect()
    }

    /// The skills served by `engine`.
    pub fn skills_of(&self, engine: EngineKind) -> Vec<&str> {
        self.skills
            .iter()
            .filter(|(_, k)| *k == engine)
            .map(|(s, _)| s.as_str())
            .collect()
    }

    /// The engine of a call whose input is `input`: its `skill`'s, else the default. An unknown
    /// or malformed `skill` is an invalid input naming the known skills.
    pub fn route(&self, input: &Value) -> Result<(Option<&str>, EngineKind), ToolError> {
        let names = || {
            self.skills
                .iter()
                .map(|(s, _)| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match input.get(SKILL_ARG) {
            None | Some(Value::Null) => Ok((None, self.default)),
            Some(Value::String(s)) => self
                .skills
                .iter()
                .find(|(name, _)| name == s.trim())
                .map(|(name, k)| (Some(name.as_str()), *k))
                .ok_or_else(|| {
                    ToolError::InvalidInput(format!(
                        "`skill` is \"{s}\", which is not one of this agent's browser skills ({}); name one of them, or leave `skill` out for the default engine ({})",
                        names(),
                        self.default
                    ))
                }),
            Some(_) => Err(ToolError::InvalidInput(format!(
                "`skill` must be the name of a browser skill ({})",
                names()
            ))),
        }
    }
}

/// The browser tools over one manager per engine, each routed by its `skill` argument
/// ([`EngineRoutes::route`]). `managers` holds one manager per engine of `routes`; the tools
/// are those some engine can serve, in `browser_tools`' order.
pub fn routed_browser_tools(
    managers: &[(EngineKind, Arc<BrowserManager>)],
    routes: &EngineRoutes,
    options: BrowserToolOptions,
) -> Vec<Arc<dyn Tool>> {
    let per_engine: Vec<(EngineKind, Vec<Arc<dyn Tool>>)> = managers
        .iter()
        .map(|(k, m)| (*k, browser_tools(m.clone(), options.clone())))
        .collect();
    // Every tool name, in the order of the engine that serves the most (Chromium: all of them).
    let mut names: Vec<String> = Vec::new();
    let mut by_size: Vec<&(EngineKind, Vec<Arc<dyn Tool>>)> = per_engine.iter().collect();
    by_size.sort_by_key(|(_, tools)| std::cmp::Reverse(tools.len()));
    for (_, tools) in by_size {
        for t in tools {
            if !names.iter().any(|n| n == t.name()) {
                names.push(t.name().to_string());
            }
        }
    }
    let skill_names: Vec<&str> = routes.skills.iter().map(|(s, _)| s.as_str()).collect();
    names
        .into_iter()
        .filter_map(|name| {
            let inner: Vec<(EngineKind, Arc<dyn Tool>)> = per_engine
                .iter()
                .filter_map(|(k, tools)| {
                    tools
                        .iter()
                        .find(|t| t.name() == name)
                        .map(|t| (*k, t.clone()))
                })
                .collect();
            let first = inner.first()?.1.clone();
            let mut schema = first.input_schema();
            if let Some(props) = schema.get_mut("properties").and_then(Value::as_object_mut) {
                props.insert(
                    SKILL_ARG.into(),
                    json!({
                        "type": "string",
                        "enum": skill_names,
                        "description": format!("Run on this skill's engine (default {})", routes.default),
                    }),
                );
            }
            Some(Arc::new(Routed {
                name,
                description: first.description().to_string(),
                schema,
                inner,
                routes: routes.clone(),
            }) as Arc<dyn Tool>)
        })
        .collect()
}

/// One browser tool over several engines.
struct Routed {
    name: String,
    description: String,
    schema: Value,
    /// The tool on each engine that can serve it.
    inner: Vec<(EngineKind, Arc<dyn Tool>)>,
    routes: EngineRoutes,
}

#[async_trait]
impl Tool for Routed {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    async fn execute(&self, ctx: &ToolContext, mut input: Value) -> Result<ToolOutput, ToolError> {
        let (skill, engine) = self.routes.route(&input)?;
        let Some((_, tool)) = self.inner.iter().find(|(k, _)| *k == engine) else {
            let who = match skill {
                Some(s) => format!("skill {s} runs on {engine}"),
                None => format!("the default engine is {engine}"),
            };
            let why = lacks(engine, &self.name)
                .map(|has| format!(", which has {has}"))
                .unwrap_or_default();
            let others = self
                .inner
                .iter()
                .flat_map(|(k, _)| self.routes.skills_of(*k))
                .collect::<Vec<_>>()
                .join(", ");
            let fix = match skill {
                Some(s) => format!(
                    "call it with `skill` set to a skill whose engine can ({others}), or set `browser_engine: chromium` under requires in {s}'s SKILL.md"
                ),
                None => format!("call it with `skill` set to a skill whose engine can ({others})"),
            };
            return Err(ToolError::Failed(format!(
                "{} cannot run here: {who}{why}; {fix} (docs/browser.md, \"Two engines in one agent\")",
                self.name
            )));
        };
        if let Some(m) = input.as_object_mut() {
            m.remove(SKILL_ARG);
        }
        tool.execute(ctx, input).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes() -> EngineRoutes {
        EngineRoutes {
            default: EngineKind::Chromium,
            skills: vec![
                ("former".into(), EngineKind::Chromium),
                ("reader".into(), EngineKind::Lightpanda),
            ],
        }
    }

    #[test]
    fn a_call_goes_to_its_skills_engine_or_the_default() {
        let r = routes();
        assert_eq!(
            r.route(&json!({"skill": "reader"})).ok(),
            Some((Some("reader"), EngineKind::Lightpanda))
        );
        assert_eq!(
            r.route(&json!({"skill": "former"})).ok(),
            Some((Some("former"), EngineKind::Chromium))
        );
        assert_eq!(r.route(&json!({})).ok(), Some((None, EngineKind::Chromium)));
        let bad = r.route(&json!({"skill": "writer"})).expect_err("unknown");
        let bad = bad.to_string();
        assert!(
            bad.contains("\"writer\"") && bad.contains("former, reader"),
            "{bad}"
        );
        assert!(r.route(&json!({"skill": 3})).is_err());
        assert_eq!(r.engines(), [EngineKind::Chromium, EngineKind::Lightpanda]);
    }

    #[test]
    fn routed_tools_take_a_skill_enum_and_a_tool_one_engine_lacks_says_so() {
        let cfg = |engine| crate::BrowserConfig {
            engine,
            ..Default::default()
        };
        let managers = [
            (
                EngineKind::Chromium,
                Arc::new(BrowserManager::new(cfg(EngineKind::Chromium))),
            ),
            (
                EngineKind::Lightpanda,
                Arc::new(BrowserManager::new(cfg(EngineKind::Lightpanda))),
            ),
        ];
        let tools = routed_browser_tools(&managers, &routes(), BrowserToolOptions::default());
        assert_eq!(tools.len(), 18, "every tool Chromium serves");
        let shot = tools
            .iter()
            .find(|t| t.name() == "browser_screenshot")
            .expect("screenshot is routed");
        let schema = shot.input_schema();
        assert_eq!(
            schema["properties"]["skill"]["enum"],
            json!(["former", "reader"])
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let err = rt
            .block_on(shot.execute(
                &ToolContext::new("t", std::env::temp_dir()),
                json!({"skill": "reader"}),
            ))
            .expect_err("lightpanda has no screenshots");
        let err = err.to_string();
        assert!(err.contains("skill reader runs on lightpanda"), "{err}");
        assert!(err.contains("which has no screenshots"), "{err}");
        assert!(err.contains("(former)"), "names a skill that can: {err}");
        assert!(err.contains("browser_engine: chromium"), "{err}");
    }
}
