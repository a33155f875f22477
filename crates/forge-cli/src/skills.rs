//! `forge skills ...` (not implemented yet).

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum SkillsCommand {
    /// Not implemented yet.
    Todo,
}

pub fn run(_cmd: SkillsCommand) -> ExitCode {
    eprintln!("forge skills: not implemented yet");
    ExitCode::from(2)
}
