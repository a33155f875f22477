//! `forge run` (one task with `--once`, or serve A2A) and `forge audit verify`.
//!
//! `forge run` loads the agent and starts it through [`Runner::start`] (model, tools, egress,
//! proxy, audit log: all in forge-runtime), then either runs one task and prints the answer and
//! the artifacts' paths, or serves A2A until Ctrl-C/SIGTERM. `--demo-site DIR` also serves DIR on
//! an ephemeral 127.0.0.1 port and exports its `127.0.0.1:PORT` as `FORGE_DEMO_SITE` before the
//! agent is loaded (the bundled example's skill allowlists `$FORGE_DEMO_SITE`).

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::demo_site::DemoSite;
use clap::{Args, Subcommand};
use forge_runtime::LoopEvent;
use forge_runtime::{
    AuditTarget, ModelChoice, Runner, RunnerOptions, ServeError, ServeOptions, StartError,
    TokenOrigin,
};
use tokio_util::sync::CancellationToken;

/// Run an agent: one task with --once, or serve it over A2A.
#[derive(Args)]
pub(crate) struct RunArgs {
    /// The agent's forge.yaml.
    #[arg(long, value_name = "FILE", default_value = "forge.yaml")]
    config: PathBuf,
    /// Address to serve A2A on. Anything but loopback requires a bearer token (.forge/runtime.token).
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to serve A2A on (0 picks a free one).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Also serve /healthz and /readyz on this port (same host; 0 picks a free one), apart from
    /// the A2A port so a flood of connections there never fails the probes. The A2A port keeps
    /// answering them too.
    #[arg(long, value_name = "PORT")]
    probe_port: Option<u16>,
    /// Run one task with this prompt, print the answer and the artifacts' paths, and exit.
    #[arg(long, value_name = "PROMPT")]
    once: Option<String>,
    /// Model provider (openai, anthropic, ollama, scripted); overrides forge.yaml and FORGE_MODEL_PROVIDER.
    #[arg(long)]
    provider: Option<String>,
    /// Model name (for scripted: the script file); overrides forge.yaml and MODEL_NAME.
    #[arg(long)]
    model: Option<String>,
    /// Write the audit log (hash-chained NDJSON) to this file instead of stderr (appends).
    #[arg(long, value_name = "FILE")]
    audit_file: Option<PathBuf>,
    /// Also serve this directory on 127.0.0.1 (ephemeral port, exported as FORGE_DEMO_SITE).
    #[arg(long, value_name = "DIR")]
    demo_site: Option<PathBuf>,
    /// Extra egress allowlist entry (repeatable), like forge.yaml egress.allowed_domains.
    #[arg(long = "allow", value_name = "ENTRY")]
    allow: Vec<String>,
    /// Model turns per task before giving up.
    #[arg(long, default_value_t = 50)]
    max_iterations: usize,
    /// With --once: narrow this task's egress to this entry (repeatable; egress.allowed_domains
    /// syntax). Only narrows: an entry the agent's policy does not allow exits 2.
    #[arg(long = "task-host", value_name = "ENTRY", requires = "once")]
    task_host: Vec<String>,
    /// With --once: tool calls this task may make (default forge.yaml tasks.max_steps, 60).
    #[arg(long, value_name = "N", requires = "once")]
    max_steps: Option<u64>,
    /// With --once: seconds this task may run (default forge.yaml tasks.max_seconds, 300).
    #[arg(long, value_name = "S", requires = "once")]
    max_seconds: Option<u64>,
    /// With --once: `text` prints the answer (and a one-line summary on stderr); `json` prints
    /// the result object {status, answer, steps, seconds, navigations, blocked, artifacts}.
    #[arg(long, value_enum, default_value_t = OnceFormat::Text, requires = "once")]
    format: OnceFormat,
    /// With --once: start the browser from login profile NAME (forge.yaml browser.profiles;
    /// needs FORGE_PROFILE_KEY) and save its cookies and local storage back when the task ends.
    #[arg(long, value_name = "NAME", requires = "once")]
    profile: Option<String>,
}

/// How `forge run --once` prints the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OnceFormat {
    /// The answer, the artifacts' paths, and a one-line summary on stderr.
    Text,
    /// The result object as one JSON document.
    Json,
}

/// Work with audit logs.
#[derive(Subcommand)]
pub(crate) enum AuditCommand {
    /// Check an audit log's hash chain; exit 1 if a line was altered, removed, inserted or reordered.
    Verify {
        /// The NDJSON audit log (from `forge run --audit-file`).
        file: PathBuf,
    },
    /// Export one task's egress ledger (every request its tools and browser made, with forge's
    /// decision and rule) as HAR 1.2 on stdout, as `GET /tasks/{id}/egress` serves it.
    Har {
        /// The NDJSON audit log (from `forge run --audit-file`).
        file: PathBuf,
        /// The task id (A2A task id, or the session of an MCP / `forge tool` run).
        task_id: String,
        /// Verify the log's hash chain first and refuse a log that fails (as `forge audit verify`).
        #[arg(long)]
        verify: bool,
    },
}

/// `forge audit ...`
pub(crate) fn audit(cmd: AuditCommand) -> ExitCode {
    match cmd {
        AuditCommand::Har {
            file,
            task_id,
            verify,
        } => {
            if verify {
                if let Err(e) = forge_runtime::verify_audit_file(&file) {
                    eprintln!("{}: audit log verification FAILED at {e}", file.display());
                    return ExitCode::from(1);
                }
            }
            let reader = match std::fs::File::open(&file) {
                Ok(f) => std::io::BufReader::new(f),
                Err(e) => {
                    eprintln!("forge audit har: cannot open {}: {e}", file.display());
                    return ExitCode::from(2);
                }
            };
            match forge_runtime::har_from_audit(reader, &task_id) {
                Ok(doc) => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&doc).unwrap_or_else(|_| doc.to_string())
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("forge audit har: {}: {e}", file.display());
                    ExitCode::from(1)
                }
            }
        }
        AuditCommand::Verify { file } => match forge_runtime::verify_audit_file(&file) {
            Ok(s) => {
                println!(
                    "{}: chain intact: {} events, head {}",
                    file.display(),
                    s.events,
                    s.head
                );
                println!(
                    "  sessions: {} started, {} ended{}",
                    s.sessions_started,
                    s.sessions_ended,
                    if s.sessions_started > s.sessions_ended {
                        " (a session has no session_end: the log was cut short, or a run is still going)"
                    } else {
                        ""
                    }
                );
                for (event, n) in &s.counts {
                    println!("  {event}: {n}");
                }
                if !s.blocked_hosts.is_empty() {
                    println!(
                        "  hosts blocked by the egress policy: {}",
                        s.blocked_hosts.join(", ")
                    );
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: audit log verification FAILED at {e}", file.display());
                ExitCode::from(1)
            }
        },
    }
}

/// `forge run ...`
pub(crate) fn run(args: RunArgs) -> ExitCode {
    // The demo site is bound before anything else so its address can be exported while the
    // process is still single-threaded (the skills expand $FORGE_DEMO_SITE when they load).
    let demo = match &args.demo_site {
        Some(dir) => match DemoSite::bind(dir) {
            Ok(d) => {
                // Still single-threaded here: no other thread reads the environment concurrently.
                std::env::set_var("FORGE_DEMO_SITE", d.addr().to_string());
                Some(d)
            }
            Err(e) => {
                eprintln!("forge run: --demo-site {}: {e}", dir.display());
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("forge run: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(run_async(args, demo))
}

async fn run_async(args: RunArgs, demo: Option<DemoSite>) -> ExitCode {
    let agent = match forge_skills::Agent::load(&args.config) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{:?}", forge_skills::miette::Report::new(e));
            return ExitCode::from(2);
        }
    };
    let options = RunnerOptions {
        model: Some(ModelChoice {
            provider: args.provider.clone(),
            model: args.model.clone(),
        }),
        allow: args.allow.clone(),
        audit: match &args.audit_file {
            Some(p) => AuditTarget::File(p.clone()),
            None => AuditTarget::Stderr,
        },
        max_iterations: args.max_iterations,
        profile: args.profile.clone(),
        ..Default::default()
    };
    let runner = match Runner::start(&agent, options).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("forge run: {e}");
            // A broken agent setup (tools, browser, proxy) is 1; a bad command line, model
            // configuration or audit file is 2.
            return ExitCode::from(match e {
                StartError::Assemble(_) => 1,
                _ => 2,
            });
        }
    };
    let browser = runner.assembled().browser().is_some();
    if let Some(model) = runner.model() {
        eprintln!(
            "forge: agent {} | model {}/{} | {} tools{}",
            runner.agent_id(),
            model.provider,
            model.name,
            runner.tools().specs().len(),
            if browser { " (browser enabled)" } else { "" }
        );
    }
    // Said once, at startup: children are kept on the proxy by their proxy variables only.
    if let forge_runtime::ConfinementStatus::ProxyOnly(why) = runner.assembled().confinement() {
        eprintln!("forge: confinement: proxy-only ({why})");
    }
    let demo_stop = CancellationToken::new();
    if let Some(d) = demo {
        let (addr, dir) = (d.addr(), d.dir().to_path_buf());
        match d.serve(demo_stop.clone()) {
            Ok(_) => eprintln!("forge: demo site {} on http://{addr}/", dir.display()),
            Err(e) => {
                eprintln!("forge run: demo site: {e}");
                runner.shutdown().await;
                return ExitCode::from(1);
            }
        }
    }

    let code = match &args.once {
        Some(p) => {
            let spec = forge_runtime::TaskSpec {
                allowed_hosts: (!args.task_host.is_empty()).then(|| args.task_host.clone()),
                max_steps: args.max_steps,
                max_seconds: args.max_seconds,
            };
            run_once(&runner, p, &spec, args.format).await
        }
        None => serve(&args, &runner).await,
    };
    demo_stop.cancel();
    // Stops the browser (removing its profile) and the proxy.
    runner.shutdown().await;
    code
}

fn progress_line(ev: &LoopEvent) -> Option<String> {
    match ev {
        LoopEvent::ModelCall { .. } => None,
        LoopEvent::Thought(t) => Some(format!("  · {}", t.lines().next().unwrap_or(""))),
        LoopEvent::ToolStart {
            name, arguments, ..
        } => {
            let mut a = arguments.to_string();
            if a.chars().count() > 120 {
                a = a.chars().take(120).collect::<String>() + "…";
            }
            Some(format!("  → {name} {a}"))
        }
        LoopEvent::ToolEnd {
            name,
            ok,
            summary,
            duration_ms,
            ..
        } => Some(format!(
            "  {} {name} ({duration_ms} ms): {summary}",
            if *ok { "✓" } else { "✗" }
        )),
    }
}

async fn run_once(
    runner: &Runner,
    prompt: &str,
    spec: &forge_runtime::TaskSpec,
    format: OnceFormat,
) -> ExitCode {
    use forge_runtime::ResultStatus;
    use forge_runtime::RunError;
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("forge: cancelling (Ctrl-C)");
            c2.cancel();
        }
    });
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let printer = tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            if let Some(l) = progress_line(&ev) {
                eprintln!("{l}");
            }
        }
    });
    let run = runner.run_once_with(prompt, spec, cancel, Some(tx)).await;
    let _ = printer.await;
    let run = match run {
        Ok(r) => r,
        Err(RunError::Spec(e)) => {
            eprintln!("forge run: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("forge run: task failed: {e}");
            return ExitCode::from(1);
        }
    };
    let code = match run.result.status {
        ResultStatus::Done | ResultStatus::Incomplete => ExitCode::SUCCESS,
        ResultStatus::Failed | ResultStatus::Canceled => ExitCode::from(1),
    };
    if format == OnceFormat::Json {
        println!("{}", run.result.to_json());
        return code;
    }
    match &run.outcome {
        Ok(o) => {
            println!("{}", o.answer.trim_end());
            if !o.artifacts.is_empty() {
                println!();
                println!("artifacts:");
                for a in &o.artifacts {
                    println!("  {}", a.display());
                }
            }
        }
        Err(e) => eprintln!("forge run: task failed: {e}"),
    }
    eprintln!("forge: {}", run.result.summary());
    code
}

/// Print one line of a running server's start-up report to stdout. A reader that has gone away (a
/// pipe closed after the first line, `forge run | head -1`) must not stop the server, and
/// `println!` panics on a broken pipe: so write errors are ignored here.
fn announce(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out
        .write_fmt(line)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
}

async fn serve(args: &RunArgs, runner: &Runner) -> ExitCode {
    let server = match runner
        .serve_a2a(ServeOptions {
            host: args.host,
            port: args.port,
            probe_port: args.probe_port,
        })
        .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("forge run: {e}");
            return ExitCode::from(match e {
                ServeError::BadEnvToken => 2,
                _ => 1,
            });
        }
    };
    let url = &server.url;
    announce(format_args!(
        "forge: serving agent {} over A2A on {url} (card: {url}.well-known/agent-card.json)",
        runner.agent_id()
    ));
    if let Some(p) = server.probe_addr {
        announce(format_args!(
            "forge: probes (/healthz, /readyz) on http://{p}/"
        ));
    }
    match (&server.token, &server.token_origin) {
        (Some(_), Some(TokenOrigin::Env)) => announce(format_args!(
            "forge: bearer token required (the one in FORGE_RUNTIME_TOKEN)"
        )),
        (Some(t), Some(TokenOrigin::File(path))) => announce(format_args!(
            "forge: bearer token required (from {}): {t}",
            path.display()
        )),
        _ => {}
    }
    announce(format_args!(
        "forge: watch page on {url}ui{}",
        if server.token.is_some() {
            " (open it once as /ui?token=<token>)"
        } else {
            ""
        }
    ));
    // The agent's egress proxy (running when cli_execute, a script tool, an MCP stdio server or
    // the browser uses it): the address its children get as HTTP_PROXY, printed so that an
    // operator (and the proxy bench) can find it.
    if let Some(p) = runner.proxy_addr() {
        announce(format_args!("forge: egress proxy on http://{p}"));
    }
    crate::signals::wait_for_shutdown().await;
    let grace = runner.drain_grace();
    eprintln!(
        "forge: draining: no new tasks; running tasks get up to {} s to finish (Ctrl-C again to stop them now)",
        grace.as_secs()
    );
    let outcome = server
        .drain(grace, crate::signals::wait_for_shutdown())
        .await;
    if outcome.interrupted > 0 {
        eprintln!(
            "forge: {} of {} running task(s) did not finish and were marked failed ({})",
            outcome.interrupted,
            outcome.running_at_start,
            forge_runtime::INTERRUPTED_BY_SHUTDOWN
        );
    }
    eprintln!("forge: shutting down");
    server.shutdown().await;
    ExitCode::SUCCESS
}
