//! `forge tool list | describe | call`: what `forge run` would register for an agent (with the
//! reason for each conditional tool), a tool's description and schema, and calling tools through
//! the full runtime path (guardrails, egress, fence, browser) without a model.
//!
//! Exit codes: 0 success; 1 a tool call returned an error (`call`); 2 the agent could not be
//! loaded or assembled (bad forge.yaml or SKILL.md, missing Chromium, invalid guardrail, ...) or
//! the command line was wrong.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use forge_runtime::{AssembledTools, ToolRunner, ToolSource, BROWSER_ABSENT_REASON};
use forge_runtime::{Runner, RunnerOptions};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// `println!` that ignores a closed stdout (`forge tool list | head -1` must not panic).
macro_rules! out {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

#[derive(Subcommand)]
pub(crate) enum ToolCommand {
    /// List the tools `forge run` would register for this agent, with the reason for each
    /// conditional tool being present or absent.
    List {
        #[command(flatten)]
        agent: AgentArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Show one tool's description, input schema and why it is registered.
    Describe {
        /// The tool name (e.g. http_request, browser_navigate).
        name: String,
        #[command(flatten)]
        agent: AgentArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Call a tool (or a JSONL script of calls, in one process and one browser session) through
    /// the full runtime: guardrails, egress policy, fence. Each result is printed as a JSON line.
    Call {
        /// The tool to call (omit with --script).
        name: Option<String>,
        /// The tool input as a JSON object.
        #[arg(long, default_value = "{}", conflicts_with = "script")]
        args: String,
        /// A file of calls, one JSON object per line: {"tool": NAME, "args": {...}}
        /// (blank lines and lines starting with # are skipped).
        #[arg(long, value_name = "FILE.jsonl")]
        script: Option<PathBuf>,
        /// The session key the calls share (one browser context per session).
        #[arg(long, default_value = "forge-tool-call")]
        session: String,
        #[command(flatten)]
        agent: AgentArgs,
    },
}

#[derive(Args)]
pub(crate) struct AgentArgs {
    /// The agent's forge.yaml.
    #[arg(long, short = 'c', default_value = "forge.yaml")]
    config: PathBuf,
    /// Extra egress allowlist entry (host, *.suffix, host:port), like `forge egress check --allow`.
    /// Ignored in deny-all mode.
    #[arg(long = "allow", value_name = "ENTRY")]
    allow: Vec<String>,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum Format {
    Text,
    Json,
}

pub(crate) fn run(cmd: ToolCommand) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    rt.block_on(run_async(cmd))
}

/// Load the agent and start it for its tools (no model), or print why not.
pub(crate) async fn load(agent: &AgentArgs) -> Result<(forge_skills::Agent, Runner), ExitCode> {
    let loaded = match forge_skills::Agent::load(&agent.config) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{:?}", miette::Report::new(e));
            return Err(ExitCode::from(2));
        }
    };
    let opts = RunnerOptions {
        allow: agent.allow.clone(),
        ..Default::default()
    };
    match Runner::start(&loaded, opts).await {
        Ok(t) => Ok((loaded, t)),
        Err(e) => {
            eprintln!("error: {e}");
            Err(ExitCode::from(2))
        }
    }
}

async fn run_async(cmd: ToolCommand) -> ExitCode {
    match cmd {
        ToolCommand::List { agent, format } => {
            let (loaded, runner) = match load(&agent).await {
                Ok(x) => x,
                Err(code) => return code,
            };
            print_list(&loaded, runner.assembled(), format);
            runner.shutdown().await;
            ExitCode::SUCCESS
        }
        ToolCommand::Describe {
            name,
            agent,
            format,
        } => {
            let (_, runner) = match load(&agent).await {
                Ok(x) => x,
                Err(code) => return code,
            };
            let code = describe(runner.assembled(), &name, format);
            runner.shutdown().await;
            code
        }
        ToolCommand::Call {
            name,
            args,
            script,
            session,
            agent,
        } => {
            let calls = match (name, script) {
                (Some(n), None) => match serde_json::from_str::<Value>(&args) {
                    Ok(v) if v.is_object() => vec![(1, n, v)],
                    Ok(_) => {
                        eprintln!("error: --args must be a JSON object, e.g. --args '{{\"url\": \"https://example.com\"}}'");
                        return ExitCode::from(2);
                    }
                    Err(e) => {
                        eprintln!("error: --args is not valid JSON: {e}");
                        return ExitCode::from(2);
                    }
                },
                (None, Some(file)) => match read_script(&file) {
                    Ok(c) => c,
                    Err(msg) => {
                        eprintln!("error: {msg}");
                        return ExitCode::from(2);
                    }
                },
                (Some(_), Some(_)) => {
                    eprintln!("error: give either a tool NAME or --script FILE, not both");
                    return ExitCode::from(2);
                }
                (None, None) => {
                    eprintln!("error: give a tool NAME (with --args JSON) or --script FILE.jsonl");
                    return ExitCode::from(2);
                }
            };
            let (_, runner) = match load(&agent).await {
                Ok(x) => x,
                Err(code) => return code,
            };
            // One run is one workspace (its own files directory), whatever --session says.
            let tools = runner.tools().in_new_workspace();
            let code = call_all(&tools, &session, calls).await;
            tools.close_session(&session).await;
            runner.shutdown().await;
            code
        }
    }
}

fn print_list(agent: &forge_skills::Agent, tools: &AssembledTools, format: Format) {
    let proxy = tools.proxy_addr().map(|a| format!("http://{a}"));
    let (c, o, p, r) = tools.guardrails().counts();
    // Hosts forge itself adds to the allowlist (MCP servers' hosts, like the model host).
    let forge_hosts: Vec<(String, String)> = tools
        .egress()
        .policy()
        .entries()
        .iter()
        .filter_map(|e| match &e.source {
            forge_egress::policy::EntrySource::Forge(why) => Some((e.text.clone(), why.clone())),
            _ => None,
        })
        .collect();
    if format == Format::Json {
        let list: Vec<Value> = tools
            .reasons()
            .iter()
            .map(|r| {
                json!({
                    "name": r.name,
                    "present": r.present,
                    "source": r.source,
                    "reason": r.reason,
                    "description": tools.registry().get(&r.name).filter(|_| r.present).map(|t| t.description().to_string()),
                })
            })
            .collect();
        let out = json!({
            "agent_id": agent.config.agent_id,
            "config": agent.config.path,
            "tools": list,
            "egress_proxy": proxy.is_some(),
            "egress_added_by_forge": forge_hosts.iter().map(|(h, why)| json!({"host": h, "why": why})).collect::<Vec<_>>(),
            "browser": tools.browser().is_some(),
            "confinement": tools.confinement().describe(),
            "guardrails": {"deny_commands": c, "deny_output": o, "deny_prompts": p, "deny_responses": r},
        });
        out!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return;
    }
    out!(
        "Tools for agent {} ({})",
        agent.config.agent_id,
        agent.config.path.display()
    );
    let width = tools
        .reasons()
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(10)
        .max("browser_* (11 tools)".len());
    // Absent browser tools all share one reason: show them as one line.
    let browser_absent: Vec<_> = tools
        .reasons()
        .iter()
        .filter(|r| {
            !r.present && r.source == ToolSource::Browser && r.reason == BROWSER_ABSENT_REASON
        })
        .collect();
    let collapse = browser_absent.len() > 1;
    for r in tools.reasons() {
        if collapse
            && !r.present
            && r.source == ToolSource::Browser
            && r.reason == BROWSER_ABSENT_REASON
        {
            if std::ptr::eq(r, browser_absent[0]) {
                out!(
                    "  {:<7}  {:<width$}  {:<12}  {}",
                    "absent",
                    format!("browser_* ({} tools)", browser_absent.len()),
                    "browser",
                    r.reason,
                );
            }
            continue;
        }
        let source = serde_json::to_value(r.source)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        out!(
            "  {:<7}  {:<width$}  {:<12}  {}",
            if r.present { "present" } else { "absent" },
            r.name,
            source,
            r.reason,
        );
    }
    out!(
        "egress proxy: {}",
        match &proxy {
            Some(_) => "started for cli_execute, script tools, the browser or stdio MCP servers"
                .to_string(),
            None => "none (no cli_execute, script tool, browser or stdio MCP server needs one)"
                .to_string(),
        }
    );
    out!("confinement: {}", tools.confinement().describe());
    for (host, why) in &forge_hosts {
        out!("egress: {host} added to the allowlist by forge ({why})");
    }
    out!("guardrails: deny_commands {c}, deny_output {o}, deny_prompts {p}, deny_responses {r}");
}

fn describe(tools: &AssembledTools, name: &str, format: Format) -> ExitCode {
    let reason = tools.reasons().iter().find(|r| r.name == name);
    let Some(tool) = tools.registry().get(name) else {
        match reason {
            Some(r) => eprintln!(
                "error: {name} is not registered for this agent: {}",
                r.reason
            ),
            None => {
                let names: Vec<&str> = tools.registry().list().iter().map(|t| t.name()).collect();
                eprintln!(
                    "error: there is no tool called {name:?}; registered: {}",
                    names.join(", ")
                );
            }
        }
        return ExitCode::from(2);
    };
    if format == Format::Json {
        let out = json!({
            "name": tool.name(),
            "description": tool.description(),
            "input_schema": tool.input_schema(),
            "reason": reason.map(|r| r.reason.clone()),
        });
        out!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        out!("{}", tool.name());
        out!("  {}", tool.description());
        if let Some(r) = reason {
            out!("  registered because: {}", r.reason);
        }
        out!("input schema:");
        out!(
            "{}",
            serde_json::to_string_pretty(&tool.input_schema()).unwrap_or_default()
        );
    }
    ExitCode::SUCCESS
}

/// Parse a JSONL script into (line number, tool, args).
fn read_script(path: &Path) -> Result<Vec<(usize, String, Value)>, String> {
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut calls = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let n = i + 1;
        let line = line.map_err(|e| format!("{}:{n}: {e}", path.display()))?;
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let v: Value = serde_json::from_str(t).map_err(|e| {
            format!("{}:{n}: not a JSON object: {e}\n  expected: {{\"tool\": \"NAME\", \"args\": {{...}}}}", path.display())
        })?;
        let tool = v
            .get("tool")
            .or_else(|| v.get("name"))
            .and_then(Value::as_str)
            .ok_or_else(|| format!("{}:{n}: missing \"tool\" (the tool name)", path.display()))?
            .to_string();
        let args = v
            .get("args")
            .or_else(|| v.get("input"))
            .cloned()
            .unwrap_or_else(|| json!({}));
        if !args.is_object() {
            return Err(format!(
                "{}:{n}: \"args\" must be a JSON object",
                path.display()
            ));
        }
        calls.push((n, tool, args));
    }
    if calls.is_empty() {
        return Err(format!("{} has no calls", path.display()));
    }
    Ok(calls)
}

async fn call_all(
    tools: &ToolRunner,
    session: &str,
    calls: Vec<(usize, String, Value)>,
) -> ExitCode {
    let mut failed = false;
    let stdout = std::io::stdout();
    for (line, name, args) in calls {
        let started = std::time::Instant::now();
        let result = tools
            .call(session, &name, args, CancellationToken::new(), None)
            .await;
        let ms = started.elapsed().as_millis() as u64;
        let out = match result {
            Ok(o) => {
                json!({"line": line, "tool": name, "ok": true, "text": o.text, "data": o.data, "duration_ms": ms})
            }
            Err(e) => {
                failed = true;
                json!({"line": line, "tool": name, "ok": false, "error": e.to_string(), "kind": e.kind(), "duration_ms": ms})
            }
        };
        let mut lock = stdout.lock();
        let _ = writeln!(lock, "{out}");
        let _ = lock.flush();
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
