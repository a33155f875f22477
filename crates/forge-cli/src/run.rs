//! `forge run` and `forge audit ...` (not implemented yet).

use std::process::ExitCode;

use clap::{Args, Subcommand};

#[derive(Args)]
pub struct RunArgs {}

#[derive(Subcommand)]
pub enum AuditCommand {
    /// Not implemented yet.
    Todo,
}

pub fn run(_args: RunArgs) -> ExitCode {
    eprintln!("forge run: not implemented yet");
    ExitCode::from(2)
}

pub fn audit(_cmd: AuditCommand) -> ExitCode {
    eprintln!("forge audit: not implemented yet");
    ExitCode::from(2)
}
