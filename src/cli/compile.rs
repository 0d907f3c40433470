//! `constrain compile` and `constrain check` (in progress).
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct CompileArgs {}
#[derive(clap::Args)]
pub struct CheckArgs {}

pub fn run_compile(_a: CompileArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("compile: in progress")
}
pub fn run_check(_a: CheckArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("check: in progress")
}
