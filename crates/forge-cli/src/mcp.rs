//! `forge mcp serve`: the agent's tools (exactly what `forge run` registers) for any MCP client,
//! over stdio (default) or streamable HTTP. The runtime does the work
//! ([`Runner::serve_mcp_stdio`], [`Runner::serve_mcp_http`]); this module parses and renders.
//!
//! stdio: stdout carries nothing but the protocol; logs and the audit log go to stderr (or the
//! audit log to `--audit-file`). HTTP: binds 127.0.0.1 by default; any other address requires the
//! bearer token, as `forge run` does.
//!
//! Exit codes: 0 the client disconnected (stdio) or the server was stopped (HTTP); 1 serving
//! failed; 2 the agent could not be loaded or started, or the command line was wrong.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use forge_runtime::{AuditTarget, McpHttpOptions, Runner, RunnerOptions, ServeError, TokenOrigin};

#[derive(Subcommand)]
pub(crate) enum McpCommand {
    /// Serve this agent's tools over MCP (stdio by default) to Claude Code, Cursor, VS Code or
    /// any MCP client, confined by the agent's egress policy and guardrails.
    Serve(ServeArgs),
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum Transport {
    /// MCP on stdin/stdout (what editors launch).
    Stdio,
    /// Streamable HTTP at http://HOST:PORT/mcp.
    Http,
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// The agent's forge.yaml.
    #[arg(long, short = 'c', default_value = "forge.yaml")]
    config: PathBuf,
    /// Extra egress allowlist entry (host, *.suffix, host:port), like `forge tool --allow`.
    #[arg(long = "allow", value_name = "ENTRY")]
    allow: Vec<String>,
    /// How clients connect.
    #[arg(long, value_enum, default_value_t = Transport::Stdio)]
    transport: Transport,
    /// HTTP: the address to bind. Anything but loopback requires the bearer token
    /// (FORGE_RUNTIME_TOKEN, else .forge/runtime.token, generated when missing).
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// HTTP: the port (0 picks a free one).
    #[arg(long, default_value_t = 8931)]
    port: u16,
    /// HTTP: also serve /healthz and /readyz on this port (same host; 0 picks a free one), apart
    /// from the MCP port so a flood of connections there never fails the probes.
    #[arg(long, value_name = "PORT")]
    probe_port: Option<u16>,
    /// Start each MCP session's browser from login profile NAME (forge.yaml browser.profiles;
    /// needs FORGE_PROFILE_KEY) and save its cookies and local storage back when the session ends.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// HTTP: a browser origin allowed to call (exact scheme://host[:port]); none by default.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origin: Vec<String>,
    /// Append the audit log to this file instead of stderr.
    #[arg(long, value_name = "FILE")]
    audit_file: Option<PathBuf>,
    /// Largest screenshot returned as image content, in bytes (larger ones: the path only).
    #[arg(long, default_value_t = 1024 * 1024, value_name = "BYTES")]
    image_cap: u64,
}

pub(crate) fn run(cmd: McpCommand) -> ExitCode {
    let McpCommand::Serve(args) = cmd;
    // Logs to stderr, never stdout (stdio carries the protocol). FORGE_LOG overrides the filter.
    let filter = tracing_subscriber::EnvFilter::try_from_env("FORGE_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,rmcp=error,chromiumoxide=error,forge_mcp::stderr=info",
        )
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("forge mcp serve: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = rt.block_on(serve(args));
    // A stdio read may still be blocked on stdin; do not wait for it.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

async fn serve(args: ServeArgs) -> ExitCode {
    let agent = match forge_skills::Agent::load(&args.config) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{:?}", forge_skills::miette::Report::new(e));
            return ExitCode::from(2);
        }
    };
    let options = RunnerOptions {
        allow: args.allow.clone(),
        profile: args.profile.clone(),
        audit: match &args.audit_file {
            Some(p) => AuditTarget::File(p.clone()),
            None => AuditTarget::Stderr,
        },
        ..Default::default()
    };
    let runner = match Runner::start(&agent, options).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("forge mcp serve: {e}");
            return ExitCode::from(2);
        }
    };
    let serve_opts = forge_mcp_serve_options(args.image_cap);
    let code = match args.transport {
        Transport::Stdio => {
            eprintln!(
                "forge: serving agent {} over MCP on stdio ({} tools)",
                runner.agent_id(),
                runner.tools().specs().len()
            );
            match runner.serve_mcp_stdio(serve_opts).await {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("forge mcp serve: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Transport::Http => serve_http(&args, &runner, serve_opts).await,
    };
    runner.shutdown().await;
    code
}

fn forge_mcp_serve_options(image_cap: u64) -> forge_runtime::McpServeOptions {
    forge_runtime::McpServeOptions {
        image_cap_bytes: image_cap,
        ..Default::default()
    }
}

async fn serve_http(
    args: &ServeArgs,
    runner: &Runner,
    serve: forge_runtime::McpServeOptions,
) -> ExitCode {
    let server = match runner
        .serve_mcp_http(McpHttpOptions {
            host: args.host,
            port: args.port,
            allowed_origins: args.allow_origin.clone(),
            serve,
            probe_port: args.probe_port,
        })
        .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("forge mcp serve: {e}");
            return ExitCode::from(match e {
                ServeError::BadEnvToken => 2,
                _ => 1,
            });
        }
    };
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "forge: serving agent {} over MCP on {} ({} tools)",
        runner.agent_id(),
        server.url,
        runner.tools().specs().len()
    );
    if let Some(p) = server.probe_addr {
        let _ = writeln!(out, "forge: probes (/healthz, /readyz) on http://{p}/");
    }
    match (&server.token, &server.token_origin) {
        (Some(_), Some(TokenOrigin::Env)) => {
            let _ = writeln!(
                out,
                "forge: bearer token required (the one in FORGE_RUNTIME_TOKEN)"
            );
        }
        (Some(t), Some(TokenOrigin::File(path))) => {
            let _ = writeln!(
                out,
                "forge: bearer token required (from {}): {t}",
                path.display()
            );
        }
        _ => {}
    }
    let _ = out.flush();
    crate::signals::wait_for_shutdown().await;
    eprintln!("forge: shutting down");
    server.shutdown().await;
    ExitCode::SUCCESS
}
