//! `forge build` and `forge package` (not implemented yet).

use std::process::ExitCode;

use clap::Args;

#[derive(Args)]
pub struct BuildArgs {}

#[derive(Args)]
pub struct PackageArgs {}

pub fn build(_args: BuildArgs) -> ExitCode {
    eprintln!("forge build: not implemented yet");
    ExitCode::from(2)
}

pub fn package(_args: PackageArgs) -> ExitCode {
    eprintln!("forge package: not implemented yet");
    ExitCode::from(2)
}
