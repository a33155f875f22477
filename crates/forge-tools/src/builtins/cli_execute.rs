//! `cli_execute`: run one of the agent's allowlisted binaries directly (never through a shell),
//! with a minimal environment, the egress proxy variables, a time limit and an output cap.
//!
//! Invariants:
//! - shells and shell-like launchers ([`SHELLS`], [`LAUNCHERS`]) are refused when the tool is
//!   built, by listed name and by the name of the file the name resolves to (so a symlink called
//!   `mysh` pointing at bash is refused too);
//! - every allowlisted name is resolved to an absolute path once, at startup; a call names the
//!   binary exactly as listed and runs that path, never a fresh PATH lookup;
//! - the child gets only [`super::process::BASE_ENV`], the configured passthrough names and the
//!   proxy variables (set last, so nothing overrides them);
//! - when confinement is on, the child runs in a network namespace whose only reachable address is
//!   the egress proxy (forge-egress `confine`): a program ignoring the proxy variables reaches
//!   nothing.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::process::{self, RunSpec};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Shells, never allowed (the same list forge-skills removes from derived binaries, plus variants).
pub const SHELLS: &[&str] = &[
    "bash",
    "sh",
    "zsh",
    "dash",
    "ksh",
    "csh",
    "tcsh",
    "fish",
    "rbash",
    "mksh",
    "ash",
    "busybox",
    "pwsh",
    "powershell",
    "nu",
    "elvish",
    "xonsh",
    "yash",
    "oksh",
    "loksh",
];
/// Programs whose job is to run another program named in their arguments; allowing one would
/// allow everything, so they are refused like shells.
pub const LAUNCHERS: &[&str] = &[
    "env",
    "sudo",
    "su",
    "doas",
    "xargs",
    "nohup",
    "setsid",
    "stdbuf",
    "timeout",
    "nice",
    "ionice",
    "chroot",
    "unshare",
    "nsenter",
    "script",
    "expect",
    "watch",
    "flock",
    "chrt",
    "taskset",
    "runuser",
    "pkexec",
    "time",
    "setarch",
    "linux32",
    "linux64",
    "i386",
    "x86_64",
    "aarch64",
    "prlimit",
    "setpriv",
    "systemd-run",
    "run-parts",
    "sg",
    "newgrp",
    "capsh",
    "strace",
    "ltrace",
    "valgrind",
    "fakeroot",
    "fakechroot",
    "firejail",
    "bwrap",
    "proot",
    "torsocks",
    "torify",
    "proxychains",
    "proxychains4",
    "parallel",
    "start-stop-daemon",
    "daemonize",
    "numactl",
    "cpulimit",
    "chpst",
    "unbuffer",
    "faketime",
    "cgexec",
    "catchsegv",
    "rlwrap",
    "dbus-launch",
    "ssh-agent",
    "toybox",
    "ld.so",
];

/// Default time limit for one call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Default cap for stdout and for stderr, each.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1024 * 1024;

/// How cli_execute is configured (forge.yaml `tools[{name: cli_execute, config}]` or derived from
/// the skills' binaries).
#[derive(Debug, Clone, PartialEq)]
pub struct CliConfig {
    pub allowed_binaries: Vec<String>,
    pub env_passthrough: Vec<String>,
    pub timeout: Duration,
    pub max_output_bytes: usize,
}

impl Default for CliConfig {
    fn default() -> Self {
        Self {
            allowed_binaries: Vec::new(),
            env_passthrough: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        }
    }
}

/// Why cli_execute could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CliSetupError {
    #[error(
        "cli_execute: `{name}` is {what} and can never be allowlisted (it would run any command); \
         remove it from allowed_binaries and list the programs the agent needs instead"
    )]
    Shell { name: String, what: &'static str },
    #[error("cli_execute: allowed_binaries entry {name:?} is not a program name; use a bare name (jq) or an absolute path (/usr/bin/jq)")]
    BadName { name: String },
    #[error("cli_execute: env_passthrough entry {name:?} is not a variable name")]
    BadEnvName { name: String },
    #[error("cli_execute: no allowed_binaries; list the programs the agent may run")]
    Empty,
}

/// A binary the tool may run.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// Found at this absolute path.
    Found(PathBuf),
    /// Not installed; calls fail with this explanation.
    Missing(String),
}

/// The `cli_execute` tool.
#[derive(Debug, Clone)]
pub struct CliExecute {
    config: CliConfig,
    binaries: BTreeMap<String, Resolved>,
    proxy_url: Option<String>,
    /// When set, each call's child runs confined (its own network namespace, the proxy only).
    confine: Option<forge_egress::confine::Confiner>,
    description: String,
}

fn refused_kind(name: &str) -> Option<&'static str> {
    let base = name.rsplit('/').next().unwrap_or(name);
    // `python3.11`-style suffixes are not an issue here, but `bash5` or `sh.exe` are not real either;
    // compare the exact file name.
    if SHELLS.contains(&base) {
        Some("a shell")
    } else if LAUNCHERS.contains(&base)
        // The dynamic loader runs the program it is given (`ld-linux-x86-64.so.2 /bin/sh`).
        || base.starts_with("ld-linux")
        || base.starts_with("ld64.so")
        || base.starts_with("ld-musl")
    {
        Some("a program launcher")
    } else {
        None
    }
}

/// `content` in the untrusted-content fence, or empty when there is nothing.
pub(crate) fn fence_nonempty(note: &str, content: &str) -> String {
    if content.is_empty() {
        String::new()
    } else {
        crate::fence::wrap(note, content)
    }
}

fn valid_env_name(n: &str) -> bool {
    !n.is_empty()
        && !n.starts_with(|c: char| c.is_ascii_digit())
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl CliExecute {
    /// Build the tool: refuse shells and launchers, resolve every binary on `PATH` now.
    /// `proxy_url` (`http://127.0.0.1:PORT`) is put in the child's proxy variables.
    pub fn new(config: CliConfig, proxy_url: Option<String>) -> Result<Self, CliSetupError> {
        let path_var = std::env::var("PATH").unwrap_or_default();
        Self::with_path(config, proxy_url, &path_var)
    }

    /// [`CliExecute::new`] with an explicit `PATH` for the lookup.
    pub fn with_path(
        config: CliConfig,
        proxy_url: Option<String>,
        path_var: &str,
    ) -> Result<Self, CliSetupError> {
        if config.allowed_binaries.is_empty() {
            return Err(CliSetupError::Empty);
        }
        for n in &config.env_passthrough {
            if !valid_env_name(n) {
                return Err(CliSetupError::BadEnvName { name: n.clone() });
            }
        }
        let mut binaries = BTreeMap::new();
        for name in &config.allowed_binaries {
            let name = name.trim();
            if name.is_empty()
                || name.contains(char::is_whitespace)
                || name.contains('\0')
                || name.ends_with('/')
            {
                return Err(CliSetupError::BadName {
                    name: name.to_string(),
                });
            }
            if name.contains('/') && !name.starts_with('/') {
                return Err(CliSetupError::BadName {
                    name: name.to_string(),
                });
            }
            if let Some(what) = refused_kind(name) {
                return Err(CliSetupError::Shell {
                    name: name.to_string(),
                    what,
                });
            }
            let found = if name.starts_with('/') {
                let p = PathBuf::from(name);
                process::is_executable(&p).then_some(p)
            } else {
                process::which_in(name, path_var)
            };
            let resolved = match found {
                Some(p) => {
                    // Refuse by what the name really is, too (symlinks like /bin/sh -> dash).
                    let real = p.canonicalize().unwrap_or_else(|_| p.clone());
                    if let Some(file) = real.file_name().and_then(|f| f.to_str()) {
                        if let Some(what) = refused_kind(file) {
                            return Err(CliSetupError::Shell {
                                name: format!("{name} (resolves to {})", real.display()),
                                what,
                            });
                        }
                    }
                    Resolved::Found(p)
                }
                None => Resolved::Missing(if name.starts_with('/') {
                    format!("{name} does not exist or is not executable")
                } else {
                    format!("`{name}` was not found on PATH when the agent started; install it and restart")
                }),
            };
            binaries.insert(name.to_string(), resolved);
        }
        let names: Vec<&str> = binaries.keys().map(String::as_str).collect();
        let description = format!(
            "Run an allowed program directly (no shell: no pipes, redirects, globbing or variable \
             expansion). Allowed binaries: {}. Returns {{stdout, stderr, exit_code, truncated}}. \
             Network access goes through the agent's egress proxy.",
            names.join(", ")
        );
        Ok(Self {
            config,
            binaries,
            proxy_url,
            confine: None,
            description,
        })
    }

    /// Set the egress proxy URL put in the child's proxy variables (the tool is built, and its
    /// configuration checked, before the proxy starts).
    pub fn set_proxy_url(&mut self, proxy_url: Option<String>) {
        self.proxy_url = proxy_url;
    }

    /// Confine each call's child (see [`process::RunSpec::confine`]); `None`: proxy-only.
    pub fn set_confiner(&mut self, confine: Option<forge_egress::confine::Confiner>) {
        self.confine = confine;
    }

    /// Whether calls run confined.
    pub fn is_confined(&self) -> bool {
        self.confine.is_some()
    }

    /// The allowlisted names and what each resolved to.
    pub fn binaries(&self) -> &BTreeMap<String, Resolved> {
        &self.binaries
    }

    /// The configuration the tool was built from.
    pub fn config(&self) -> &CliConfig {
        &self.config
    }
}

#[async_trait]
impl Tool for CliExecute {
    fn name(&self) -> &str {
        "cli_execute"
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        let names: Vec<&String> = self.binaries.keys().collect();
        json!({
            "type": "object",
            "properties": {
                "binary": {"type": "string", "enum": names, "description": "one of the allowed binaries"},
                "args": {"type": "array", "items": {"type": "string"}, "description": "arguments, one per element"},
                "stdin": {"type": "string", "description": "optional text fed to the program's standard input"}
            },
            "required": ["binary"],
            "additionalProperties": false
        })
    }

    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let binary = input
            .get("binary")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::InvalidInput("`binary` (a string) is required".into()))?;
        let args: Vec<String> = match input.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    Value::Number(n) => Ok(n.to_string()),
                    Value::Bool(b) => Ok(b.to_string()),
                    _ => Err(ToolError::InvalidInput(
                        "`args` must be a list of strings".into(),
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(ToolError::InvalidInput(
                    "`args` must be a list of strings".into(),
                ))
            }
        };
        if args.iter().any(|a| a.contains('\0')) {
            return Err(ToolError::InvalidInput(
                "an argument contains a NUL byte".into(),
            ));
        }
        let stdin = match input.get("stdin") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.as_bytes().to_vec()),
            Some(_) => return Err(ToolError::InvalidInput("`stdin` must be a string".into())),
        };
        let program = match self.binaries.get(binary) {
            Some(Resolved::Found(p)) => p.clone(),
            Some(Resolved::Missing(why)) => {
                return Err(ToolError::Failed(format!("cli_execute: {why}")))
            }
            None => {
                let what = refused_kind(binary)
                    .map(|w| format!(" ({w}; shells are never allowed, pass the program and its arguments directly)"))
                    .unwrap_or_default();
                let names: Vec<&str> = self.binaries.keys().map(String::as_str).collect();
                return Err(ToolError::InvalidInput(format!(
                    "`{binary}` is not an allowed binary{what}; allowed: {}",
                    names.join(", ")
                )));
            }
        };
        let extra = process::child_proxy_env(self.confine.as_ref(), self.proxy_url.as_deref());
        let timeout = match ctx.timeout {
            Some(t) => t.min(self.config.timeout),
            None => self.config.timeout,
        };
        let spec = RunSpec {
            program,
            args,
            env: process::child_env(&self.config.env_passthrough, &extra),
            // The call's workspace, never a directory shared with other conversations.
            cwd: Some(process::workspace_cwd(&ctx.files_dir)?),
            stdin,
            timeout,
            max_output_bytes: self.config.max_output_bytes,
            confine: self.confine.clone(),
        };
        let result = process::run(&spec, &ctx.cancel).await?;
        // The data is the plain result; the text the model sees has the same shape with stdout and
        // stderr fenced, because a program's output may carry outside content (a fetched page).
        // Serialising a struct of strings, an integer and a bool cannot fail.
        let data = serde_json::to_value(&result).unwrap_or(Value::Null);
        let note = |stream: &str| format!("source=cli_execute binary={binary} stream={stream}");
        let fenced = json!({
            "stdout": fence_nonempty(&note("stdout"), &result.stdout),
            "stderr": fence_nonempty(&note("stderr"), &result.stderr),
            "exit_code": result.exit_code,
            "truncated": result.truncated,
        });
        Ok(ToolOutput {
            text: fenced.to_string(),
            data: Some(data),
        })
    }
}
