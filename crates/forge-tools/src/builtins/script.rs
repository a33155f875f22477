//! Skill script tools: a skill's `## Tool: x` section bound to `skills/<skill>/scripts/x.{sh,py,js}`
//! (or the same name with `-` for `_`), run as `<interpreter> <script> <json args>` without a shell,
//! with the skill's environment, the egress proxy variables and the skill's time limit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::process::{self, RunSpec};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Default time limit when the skill gives no `timeout_hint`.
pub const DEFAULT_SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);
/// Cap for stdout and for stderr, each.
pub const SCRIPT_MAX_OUTPUT_BYTES: usize = 1024 * 1024;

/// Script extensions in lookup order, with the interpreters tried for each.
pub const INTERPRETERS: &[(&str, &[&str])] = &[
    ("sh", &["bash", "sh"]),
    ("py", &["python3", "python"]),
    ("js", &["node", "nodejs"]),
];

/// Where a tool's script was looked for and what was found.
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptLookup {
    /// The script and the interpreter that runs it.
    Found {
        script: PathBuf,
        interpreter: PathBuf,
    },
    /// No script file: every path tried.
    NoScript { tried: Vec<PathBuf> },
    /// A script exists but its interpreter is not installed.
    NoInterpreter {
        script: PathBuf,
        wanted: Vec<String>,
    },
}

/// Find the script for tool `tool_name` in `skill_dir/scripts` and resolve its interpreter on `path_var`.
pub fn find_script(skill_dir: &Path, tool_name: &str, path_var: &str) -> ScriptLookup {
    // The name comes from a SKILL.md heading: it must name a file directly in `scripts`, never a
    // path (`../x` would run a script outside the skill, past discovery's symlink check).
    let plain = !tool_name.is_empty()
        && !tool_name.starts_with('.')
        && !tool_name.contains(['/', '\\', '\0']);
    if !plain {
        return ScriptLookup::NoScript { tried: Vec::new() };
    }
    let scripts = skill_dir.join("scripts");
    let mut stems = vec![tool_name.to_string()];
    let dashed = tool_name.replace('_', "-");
    if dashed != tool_name {
        stems.push(dashed);
    }
    let mut tried = Vec::new();
    for stem in &stems {
        for (ext, _) in INTERPRETERS {
            let p = scripts.join(format!("{stem}.{ext}"));
            let is_file = std::fs::metadata(&p).map(|m| m.is_file()).unwrap_or(false);
            if is_file {
                return match interpreter_for(&p, path_var) {
                    Ok(interpreter) => ScriptLookup::Found {
                        script: p,
                        interpreter,
                    },
                    Err(wanted) => ScriptLookup::NoInterpreter { script: p, wanted },
                };
            }
            tried.push(p);
        }
    }
    ScriptLookup::NoScript { tried }
}

/// The interpreter that runs `script`, chosen by its extension ([`INTERPRETERS`]) and found on
/// `path_var`; else the interpreters that would do. forge-runtime calls this for the script the
/// tool plan (forge-skills) bound to a `## Tool:` section.
pub fn interpreter_for(script: &Path, path_var: &str) -> Result<PathBuf, Vec<String>> {
    let ext = script.extension().and_then(|e| e.to_str()).unwrap_or("");
    let Some((_, interps)) = INTERPRETERS.iter().find(|(e, _)| *e == ext) else {
        return Err(Vec::new());
    };
    interps
        .iter()
        .find_map(|i| process::which_in(i, path_var))
        .ok_or_else(|| interps.iter().map(|s| s.to_string()).collect())
}

/// A tool backed by a skill's script.
#[derive(Debug, Clone)]
pub struct ScriptTool {
    pub name: String,
    pub skill: String,
    pub description: String,
    pub script: PathBuf,
    pub interpreter: PathBuf,
    /// Environment names passed through from forge's environment (the skill's `requires.env`).
    pub env_passthrough: Vec<String>,
    /// `http://127.0.0.1:PORT` of the egress proxy, put in the proxy variables.
    pub proxy_url: Option<String>,
    /// When set, the script runs confined (its own network namespace, the proxy only).
    pub confine: Option<forge_egress::confine::Confiner>,
    pub timeout: Duration,
}

#[async_trait]
impl Tool for ScriptTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "description": format!("Arguments for skill {}'s {} script, passed as one JSON argument.", self.skill, self.name),
            "additionalProperties": true
        })
    }

    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let extra = process::child_proxy_env(self.confine.as_ref(), self.proxy_url.as_deref());
        let timeout = ctx.timeout.unwrap_or(self.timeout);
        // The script runs in the call's workspace, so its path must not depend on the cwd.
        let script = std::path::absolute(&self.script).unwrap_or_else(|_| self.script.clone());
        let spec = RunSpec {
            program: self.interpreter.clone(),
            args: vec![script.to_string_lossy().into_owned(), input.to_string()],
            env: process::child_env(&self.env_passthrough, &extra),
            cwd: Some(process::workspace_cwd(&ctx.files_dir)?),
            stdin: None,
            timeout,
            max_output_bytes: SCRIPT_MAX_OUTPUT_BYTES,
            confine: self.confine.clone(),
        };
        let r = process::run(&spec, &ctx.cancel).await?;
        if r.exit_code != 0 {
            let tail: String = {
                let s = r.stderr.trim();
                let start = s
                    .char_indices()
                    .rev()
                    .nth(2000)
                    .map(|(i, _)| i)
                    .unwrap_or(0);
                s[start..].to_string()
            };
            // stderr is the program's output as much as stdout is (it can carry fetched content):
            // the model sees it fenced.
            let shown = if tail.is_empty() {
                "(no stderr)".to_string()
            } else {
                super::cli_execute::fence_nonempty(
                    &format!(
                        "source=skill-script skill={} tool={} stream=stderr",
                        self.skill, self.name
                    ),
                    &tail,
                )
            };
            return Err(ToolError::Failed(format!(
                "script {} (skill {}) exited with code {}: {shown}",
                self.script.display(),
                self.skill,
                r.exit_code,
            )));
        }
        // The script's output may carry outside content: the model sees it fenced.
        let mut text = super::cli_execute::fence_nonempty(
            &format!(
                "source=skill-script skill={} tool={}",
                self.skill, self.name
            ),
            &r.stdout,
        );
        if r.truncated {
            text.push_str(&format!(
                "\n[output truncated at {SCRIPT_MAX_OUTPUT_BYTES} bytes]"
            ));
        }
        let data = serde_json::from_str::<Value>(r.stdout.trim()).ok();
        Ok(ToolOutput { text, data })
    }
}
