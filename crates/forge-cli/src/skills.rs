//! `forge skills list|validate|audit`: argument parsing, output (text or JSON) and exit codes for
//! skills. Parsing, aggregation and scoring live in forge-skills and forge-analyzer.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use forge_analyzer::Policy;
use forge_skills::miette::{Diagnostic, GraphicalReportHandler, GraphicalTheme};
use forge_skills::{Agent, Error, Skill};

#[derive(Subcommand)]
pub(crate) enum SkillsCommand {
    /// List skills: name, icon, category, tags, capabilities, source.
    List(ListArgs),
    /// Parse every skill, check declared binaries on PATH and required env; exit 1 on errors.
    Validate(ValidateArgs),
    /// Score skills for risk and check them against a security policy; exit 1 on failure.
    Audit(AuditArgs),
}

#[derive(Clone, Copy, Default, ValueEnum)]
pub(crate) enum Format {
    #[default]
    Text,
    Json,
}

/// Where skills come from (shared by all three commands).
#[derive(Args, Clone, Default)]
pub(crate) struct Source {
    /// A directory of skills (`<dir>/<name>/SKILL.md`, `<dir>/<name>.md`) instead of the agent's.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The agent's forge.yaml (default: ./forge.yaml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    source: Source,
    /// List the skills embedded in forge (with --dir: in addition to that directory's).
    #[arg(long)]
    embedded: bool,
    /// Only skills in this category.
    #[arg(long)]
    category: Option<String>,
    /// Only skills having all of these tags (comma-separated).
    #[arg(long, value_delimiter = ',')]
    tags: Vec<String>,
    /// Output format (json: machine-readable, on stdout).
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Args)]
pub(crate) struct ValidateArgs {
    #[command(flatten)]
    source: Source,
    /// Output format (json: machine-readable, on stdout).
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Args)]
pub(crate) struct AuditArgs {
    #[command(flatten)]
    source: Source,
    /// Audit the skills embedded in forge (with --dir: in addition to that directory's).
    #[arg(long)]
    embedded: bool,
    /// Security policy YAML (default: forge.yaml `security.policy_path`, else built-in defaults).
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Output format (json: machine-readable, on stdout).
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

pub(crate) fn run(cmd: SkillsCommand) -> ExitCode {
    match cmd {
        SkillsCommand::List(a) => list(a),
        SkillsCommand::Validate(a) => validate(a),
        SkillsCommand::Audit(a) => audit(a),
    }
}

/// Render a diagnostic to stderr: colors and unicode on a terminal, plain ASCII otherwise (so
/// logs and tests see stable text).
pub(crate) fn report(diag: &dyn Diagnostic) {
    let tty = std::io::stderr().is_terminal();
    let theme = if tty {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::none()
    };
    let mut out = String::new();
    let handler = GraphicalReportHandler::new_themed(theme).with_width(100);
    if handler.render_report(&mut out, diag).is_err() {
        out = format!("error: {diag}\n");
    }
    eprint!("{out}");
}

/// The skills selected by `--dir`/`--embedded`/`--config`, the agent (if loaded) and all errors.
struct Loaded {
    skills: Vec<Skill>,
    agent: Option<Agent>,
    errors: Vec<Error>,
}

fn load(source: &Source, embedded: bool) -> Result<Loaded, Error> {
    let mut out = Loaded {
        skills: Vec::new(),
        agent: None,
        errors: Vec::new(),
    };
    if let Some(dir) = &source.dir {
        if !dir.is_dir() {
            return Err(Error::Io {
                path: dir.clone(),
                error: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "not a directory of skills",
                ),
            });
        }
        let d = forge_skills::discover(dir);
        out.skills = d.skills;
        out.errors = d.errors;
    }
    if embedded {
        for s in forge_skills::embedded_skills()? {
            if !out.skills.iter().any(|x| x.name == s.name) {
                out.skills.push(s);
            }
        }
    }
    if source.dir.is_none() && (!embedded || source.config.is_some()) {
        let config = source
            .config
            .clone()
            .unwrap_or_else(|| PathBuf::from("forge.yaml"));
        let (agent, errors) = Agent::load_all(&config)?;
        for w in &agent.config.warnings {
            report(w);
        }
        let mut skills = agent.skills.clone();
        for s in out.skills.drain(..) {
            if !skills.iter().any(|x| x.name == s.name) {
                skills.push(s);
            }
        }
        out.skills = skills;
        out.errors.extend(errors);
        out.agent = Some(agent);
    }
    Ok(out)
}

fn fail(e: &Error) -> ExitCode {
    report(e);
    ExitCode::from(1)
}

// ---- list ----------------------------------------------------------------------------------

fn list(a: ListArgs) -> ExitCode {
    let loaded = match load(&a.source, a.embedded) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    for e in &loaded.errors {
        report(e);
    }
    let wanted_tags: Vec<String> = a
        .tags
        .iter()
        .map(|t| t.trim().to_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    let skills: Vec<&Skill> = loaded
        .skills
        .iter()
        .filter(|s| {
            a.category
                .as_ref()
                .is_none_or(|c| s.category.as_deref() == Some(c.to_lowercase().as_str()))
        })
        .filter(|s| wanted_tags.iter().all(|t| s.tags.contains(t)))
        .collect();
    match a.format {
        Format::Json => {
            let rows: Vec<serde_json::Value> = skills
                .iter()
                .map(|s| {
                    serde_json::json!({
                        "name": s.name,
                        "description": s.description,
                        "icon": s.icon,
                        "category": s.category,
                        "tags": s.tags,
                        "capabilities": s.capabilities(),
                        "source": s.source,
                        "path": s.path,
                        "tools": s.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
                    })
                })
                .collect();
            println!(
                "{}",
                serde_json::to_string_pretty(&rows).unwrap_or_else(|_| "[]".into())
            );
        }
        Format::Text => print!("{}", list_table(&skills)),
    }
    if loaded.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn list_table(skills: &[&Skill]) -> String {
    if skills.is_empty() {
        return "no skills found\n".to_string();
    }
    let rows: Vec<[String; 6]> = skills
        .iter()
        .map(|s| {
            [
                s.name.clone(),
                s.icon.clone().unwrap_or_else(|| "-".into()),
                s.category.clone().unwrap_or_else(|| "-".into()),
                if s.tags.is_empty() {
                    "-".into()
                } else {
                    s.tags.join(",")
                },
                if s.capabilities().is_empty() {
                    "-".into()
                } else {
                    s.capabilities()
                        .iter()
                        .map(|c| c.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                },
                s.source.to_string(),
            ]
        })
        .collect();
    let header = ["NAME", "ICON", "CATEGORY", "TAGS", "CAPABILITIES", "SOURCE"];
    let mut widths: Vec<usize> = header.iter().map(|h| display_width(h)).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(display_width(c));
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(c);
                s.push_str(&" ".repeat(w - display_width(c) + 2));
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(header.to_vec());
    for r in &rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// Terminal columns of `s`: emoji and other wide pictographs take two, variation selectors and
/// joiners none (enough for icons; no table cell holds CJK text).
fn display_width(s: &str) -> usize {
    s.chars()
        .map(|c| match c as u32 {
            0xFE00..=0xFE0F | 0x200D => 0,
            0x1F000..=0x1FAFF | 0x2600..=0x27BF | 0x2B00..=0x2BFF => 2,
            _ => 1,
        })
        .sum()
}

// ---- validate ------------------------------------------------------------------------------

/// A problem found by `validate` beyond parse errors.
#[derive(serde::Serialize)]
struct Problem {
    severity: &'static str,
    skill: String,
    message: String,
    fix: String,
    /// Rendered as a miette diagnostic in text mode (it has a span).
    #[serde(skip)]
    spanned: bool,
}

fn validate(a: ValidateArgs) -> ExitCode {
    let loaded = match load(&a.source, false) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    let mut problems = Vec::new();
    for s in &loaded.skills {
        for w in &s.warnings {
            problems.push(Problem {
                severity: "warning",
                skill: s.name.clone(),
                message: format!("{}: {}", w.location(), w.message),
                fix: w.help.clone().unwrap_or_default(),
                spanned: true,
            });
        }
        let Some(f) = &s.forge else { continue };
        for b in &f.requires.bins {
            if find_on_path(&b.name).is_none() {
                problems.push(Problem {
                    severity: if b.optional { "warning" } else { "error" },
                    skill: s.name.clone(),
                    message: format!(
                        "binary \"{}\" is not on PATH{}",
                        b.name,
                        if b.optional { " (optional)" } else { "" }
                    ),
                    fix: match (&b.apt, &b.apk, &b.url) {
                        (Some(apt), _, _) => format!("install it, e.g. `apt-get install {apt}`"),
                        (_, Some(apk), _) => format!("install it, e.g. `apk add {apk}`"),
                        (_, _, Some(url)) => format!("download it from {url}"),
                        _ => format!("install `{}` or add its directory to PATH", b.name),
                    },
                    spanned: false,
                });
            }
        }
        let env = &f.requires.env;
        for v in &env.required {
            if std::env::var_os(v).is_none_or(|x| x.is_empty()) {
                problems.push(Problem {
                    severity: "error",
                    skill: s.name.clone(),
                    message: format!("required env var {v} is not set"),
                    fix: format!("export {v}=... before running the agent"),
                    spanned: false,
                });
            }
        }
        if !env.one_of.is_empty()
            && env
                .one_of
                .iter()
                .all(|v| std::env::var_os(v).is_none_or(|x| x.is_empty()))
        {
            problems.push(Problem {
                severity: "error",
                skill: s.name.clone(),
                message: format!(
                    "none of the env vars {} is set (one is required)",
                    env.one_of.join(", ")
                ),
                fix: format!("export one of {}", env.one_of.join(", ")),
                spanned: false,
            });
        }
    }
    let parse_errors = loaded.errors.len();
    let errors = parse_errors + problems.iter().filter(|p| p.severity == "error").count();
    let warnings = problems.iter().filter(|p| p.severity == "warning").count()
        + loaded
            .agent
            .as_ref()
            .map(|a| a.config.warnings.len())
            .unwrap_or(0);
    match a.format {
        Format::Json => {
            let parse: Vec<serde_json::Value> = loaded
                .errors
                .iter()
                .map(|e| {
                    serde_json::json!({
                        "severity": "error",
                        "message": e.to_string(),
                        "fix": e.help().map(|h| h.to_string()).unwrap_or_default(),
                    })
                })
                .collect();
            let out = serde_json::json!({
                "skills": loaded.skills.iter().map(|s| &s.name).collect::<Vec<_>>(),
                "parse_errors": parse,
                "problems": problems,
                "errors": errors,
                "warnings": warnings,
                "valid": errors == 0,
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&out).unwrap_or_else(|_| "{}".into())
            );
        }
        Format::Text => {
            for e in &loaded.errors {
                report(e);
            }
            for w in loaded.skills.iter().flat_map(|s| &s.warnings) {
                report(w);
            }
            for p in problems.iter().filter(|p| !p.spanned) {
                eprintln!("{}: {}: {}", p.severity, p.skill, p.message);
                if !p.fix.is_empty() {
                    eprintln!("  help: {}", p.fix);
                }
            }
            let n = loaded.skills.len();
            if errors == 0 {
                println!(
                    "ok: {n} skill{} valid ({warnings} warning{})",
                    if n == 1 { "" } else { "s" },
                    if warnings == 1 { "" } else { "s" }
                );
            } else {
                println!(
                    "invalid: {errors} error{}, {warnings} warning{} in {n} parsed skill{}",
                    if errors == 1 { "" } else { "s" },
                    if warnings == 1 { "" } else { "s" },
                    if n == 1 { "" } else { "s" }
                );
            }
        }
    }
    if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The first executable named `name` on PATH (or `name` itself if it is a path).
fn find_on_path(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return forge_which::is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    forge_which::find_in(name, std::env::split_paths(&path))
}

// ---- audit ---------------------------------------------------------------------------------

fn audit(a: AuditArgs) -> ExitCode {
    let loaded = match load(&a.source, a.embedded) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    if !loaded.errors.is_empty() {
        // Auditing a partial set would understate the risk: fail on unparsable skills.
        for e in &loaded.errors {
            report(e);
        }
        eprintln!("error: fix the skills above before auditing (forge skills validate lists every problem)");
        return ExitCode::from(1);
    }
    let policy_path = a.policy.clone().or_else(|| {
        let agent = loaded.agent.as_ref()?;
        let p = agent.config.security.policy_path.as_ref()?;
        Some(agent.dir.join(p))
    });
    let policy = match policy_path {
        Some(p) => match Policy::load(&p) {
            Ok(p) => p,
            Err(e) => return fail(&e),
        },
        None => Policy::default(),
    };
    let report = forge_analyzer::audit(&loaded.skills, &policy);
    // forge.yaml `mcp.servers`: their http hosts are egress forge adds (like the model host).
    let mcp: Vec<(String, String, String)> = loaded
        .agent
        .iter()
        .flat_map(|ag| ag.config.mcp.servers.iter())
        .map(|m| {
            let reach = match (&m.url, &m.command) {
                (Some(u), _) => forge_runtime::mcp_egress_entry(u).unwrap_or_else(|| u.clone()),
                (None, Some(c)) => {
                    format!("stdio command {c} (its traffic goes through the egress proxy)")
                }
                _ => String::new(),
            };
            (m.name.clone(), m.transport.as_str().to_string(), reach)
        })
        .collect();
    match a.format {
        Format::Json if mcp.is_empty() => println!("{}", report.to_json()),
        Format::Json => {
            let mut v: serde_json::Value =
                serde_json::from_str(&report.to_json()).unwrap_or(serde_json::Value::Null);
            if let Some(obj) = v.as_object_mut() {
                obj.insert(
                    "mcp_servers".into(),
                    mcp.iter()
                        .map(
                            |(n, t, r)| serde_json::json!({"name": n, "transport": t, "egress": r}),
                        )
                        .collect(),
                );
            }
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default())
        }
        Format::Text => {
            print!("{}", report.to_text());
            if !mcp.is_empty() {
                println!(
                    "MCP servers (forge.yaml mcp.servers; egress forge adds to the allowlist):"
                );
                for (n, t, r) in &mcp {
                    println!("  {n} ({t}): {r}");
                }
            }
        }
    }
    // forge.yaml secrets (origins and hosts) and browser.profiles (origins): every place they are
    // bound to must be inside the allowlist.
    let mut secrets_ok = true;
    if let Some(ag) = loaded.agent.as_ref() {
        let entries: Vec<String> = ag
            .config
            .egress
            .allowed_domains
            .iter()
            .chain(&ag.aggregate.egress_domains)
            .cloned()
            .collect();
        let (file, mode) = (ag.config.path.display(), ag.config.egress.mode);
        for secret in &ag.config.secrets.entries {
            for outside in secret.outside_allowlist(mode, &entries) {
                secrets_ok = false;
                eprintln!(
                    "error: {file}: secrets.{}: secret `{}` is bound to {outside}, which the egress policy (mode {}) does not allow\n  fix: add {outside} to `egress.allowed_domains` (with its port when not 80/443), or remove it from the secret's origins/hosts",
                    secret.name,
                    secret.name,
                    mode.as_str()
                );
            }
        }
        for profile in &ag.config.browser.profiles {
            for outside in profile.outside_allowlist(mode, &entries) {
                secrets_ok = false;
                eprintln!(
                    "error: {file}: browser.profiles.{}: profile `{}` keeps the login of {outside}, which the egress policy (mode {}) does not allow\n  fix: add {outside} to `egress.allowed_domains` (with its port when not 80/443), or remove it from the profile's origins",
                    profile.name,
                    profile.name,
                    mode.as_str()
                );
            }
        }
    }
    if report.policy_summary.passed && secrets_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
