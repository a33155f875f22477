//! `forge egress ...` (not implemented yet).

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum EgressCommand {
    /// Not implemented yet.
    Todo,
}

pub fn run(_cmd: EgressCommand) -> ExitCode {
    eprintln!("forge egress: not implemented yet");
    ExitCode::from(2)
}
