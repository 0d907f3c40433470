//! `constrain distribution` (see issue 4).
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct DistributionArgs {}

pub fn run(_a: DistributionArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("distribution: not built yet")
}
