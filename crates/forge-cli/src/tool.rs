//! `forge tool ...` (not implemented yet).

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum ToolCommand {
    /// Not implemented yet.
    Todo,
}

pub fn run(_cmd: ToolCommand) -> ExitCode {
    eprintln!("forge tool: not implemented yet");
    ExitCode::from(2)
}
