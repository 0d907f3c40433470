//! `constrain view TRACE.json -o page.html`: renders a step trace (written by
//! `constrain --trace FILE`) as a self-contained page: each step's top-16
//! logits as bars, temperature and top-p sliders, the chosen token
//! highlighted and masked tokens marked (`constrain_model::inspector`).
//! Exit 0; an unreadable or malformed trace is one `error:` line and exit 2.

use anyhow::Context;
use constrain_model::inspector;
use constrain_model::trace::Trace;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ViewArgs {
    /// The trace (JSON, from `constrain --trace FILE`).
    #[arg(value_name = "TRACE.json")]
    trace: PathBuf,
    /// The page to write.
    #[arg(short = 'o', long = "output", value_name = "page.html")]
    output: PathBuf,
}

pub fn run(a: ViewArgs) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(&a.trace)
        .with_context(|| format!("cannot read trace {}", a.trace.display()))?;
    let trace: Trace = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a constrain trace (expected JSON with model, prompt, settings, steps, sequence_logprob)",
            a.trace.display()
        )
    })?;
    std::fs::write(&a.output, inspector::page(&trace))
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    eprintln!("wrote {} ({} steps)", a.output.display(), trace.steps.len());
    Ok(ExitCode::SUCCESS)
}
