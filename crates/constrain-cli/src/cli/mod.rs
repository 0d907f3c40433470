//! Command-line interface. Each subcommand lives in its own file with its own
//! clap `Args` struct and a `run` returning an exit code.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod beam;
mod bench_serve;
mod common;
mod compile;
mod distribution;
mod generate;
mod grammar;
mod maskbench;
mod schema_args;
mod serve;
mod soak;
mod view;

#[derive(Parser)]
#[command(
    name = "constrain",
    version,
    about = "Structured-output decoding that always parses",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// The main job (no subcommand): constrained generation.
    #[command(flatten)]
    generate: generate::GenerateArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Build the token index for a regex, grammar or schema and print its statistics.
    Compile(compile::CompileArgs),
    /// Walk the guide over the canonical tokens of a text: exit 0 accepted, 1 rejected.
    Check(compile::CheckArgs),
    /// Run schemas with valid/invalid instances by MaskBench's rules and report TTFM/TBM.
    Maskbench(maskbench::MaskbenchArgs),
    /// Show how each sampling stage shifts a small distribution.
    Distribution(Box<distribution::DistributionArgs>),
    /// Render a step trace (`--trace FILE`) as a self-contained HTML page.
    View(view::ViewArgs),
    /// Explain beam search against greedy on a toy tree of next-token probabilities.
    Beam(beam::BeamArgs),
    /// Generate from random logits over many schemas and check every output validates: exit 1 if any fails.
    Soak(Box<soak::SoakArgs>),
    /// Serve the OpenAI chat completions API (JSON Schema, tools, streaming) over HTTP.
    Serve(serve::ServeArgs),
    /// Grammar tools: `grammar convert --from gbnf --to lark FILE` (and back), exact.
    Grammar(grammar::GrammarArgs),
    /// Send a bounded load of streamed requests to a running server; print latency, TTFT, tokens/s, errors.
    BenchServe(bench_serve::BenchServeArgs),
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // One line: the message without the usage block.
            let text = e.to_string();
            let msg: Vec<&str> = text
                .lines()
                .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            let msg = msg.join(" ");
            eprintln!("error: {}", msg.trim_start_matches("error: "));
            return ExitCode::from(2);
        }
    };
    if cli.command.is_some() {
        constrain_testkit::process::no_huge_pages();
    }
    // The one-shot schema commands keep freed memory for the next compile;
    // a server gives it back (a refused request's compile must not stay in
    // its resident set), and so does generation.
    if matches!(
        cli.command,
        Some(
            Command::Compile(_)
                | Command::Check(_)
                | Command::Maskbench(_)
                | Command::Distribution(_)
                | Command::Soak(_)
        )
    ) {
        constrain_testkit::process::keep_freed_memory();
    }
    let result = match cli.command {
        Some(Command::Compile(a)) => compile::run_compile(a),
        Some(Command::Check(a)) => compile::run_check(a),
        Some(Command::Maskbench(a)) => maskbench::run(a),
        Some(Command::Distribution(a)) => distribution::run(*a),
        Some(Command::Soak(a)) => soak::run(*a),
        Some(Command::Serve(a)) => serve::run(a),
        Some(Command::BenchServe(a)) => bench_serve::run(a),
        Some(Command::Beam(a)) => beam::run(a),
        Some(Command::View(a)) => view::run(a),
        Some(Command::Grammar(a)) => grammar::run(a),
        None => generate::run(cli.generate),
    };
    match result {
        Ok(code) => code,
        Err(e) => common::report(&e),
    }
}
