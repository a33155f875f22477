//! `forge`: run AI agents described by files, audit their skills, package them for production.
//!
//! This crate only parses arguments, renders output and maps errors to exit codes; the logic lives
//! in the library crates. Each command family has its own module:
//! `skills` (forge skills ...), `egress` (forge egress ...), `tool` (forge tool ...),
//! `mcp` (forge mcp serve), `profile` (forge profile list/delete), `run` (forge run, forge audit ...), `forms` (forge forms ...), `build` (forge build, forge package);
//! `signals` holds the one Ctrl-C/SIGTERM waiter the long-running commands share.
//! `demo_site` is the static file server of `forge run --demo-site`.

// The one crate that renders output (the workspace denies printing everywhere else).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod build;
mod demo_site;
mod egress;
mod forms;
mod mcp;
mod profile;
mod run;
mod signals;
mod skills;
mod tool;

/// Run AI agents described by files, audit their skills, and package them for production.
#[derive(Parser)]
#[command(name = "forge", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse, list, validate and audit skills.
    #[command(subcommand)]
    Skills(skills::SkillsCommand),
    /// Check URLs against the egress policy, or run the egress proxy standalone.
    #[command(subcommand)]
    Egress(egress::EgressCommand),
    /// List, describe and call the tools an agent would have.
    #[command(subcommand)]
    Tool(tool::ToolCommand),
    /// Serve an agent's tools over MCP (Claude Code, Cursor, VS Code, any MCP client).
    #[command(subcommand)]
    Mcp(mcp::McpCommand),
    /// Run an agent: one task with --once, or serve A2A.
    Run(run::RunArgs),
    /// List or delete the agent's login profiles (names, origins, size, last use; never values).
    #[command(subcommand)]
    Profile(profile::ProfileCommand),
    /// Learn web forms and submit batches of rows through them (docs/forms.md).
    #[command(subcommand)]
    Forms(forms::FormsCommand),
    /// Work with audit logs.
    #[command(subcommand)]
    Audit(run::AuditCommand),
    /// Write the container build context and Kubernetes manifests for an agent.
    Build(build::BuildArgs),
    /// Build the agent's container image.
    Package(build::PackageArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Skills(c) => skills::run(c),
        Command::Egress(c) => egress::run(c),
        Command::Tool(c) => tool::run(c),
        Command::Mcp(c) => mcp::run(c),
        Command::Run(a) => run::run(a),
        Command::Forms(c) => forms::run(c),
        Command::Audit(c) => run::audit(c),
        Command::Profile(c) => profile::run(c),
        Command::Build(a) => build::build(a),
        Command::Package(a) => build::package(a),
    }
}
