//! `constrain beam`: explains beam search on a toy tree of next-token
//! probabilities, as `constrain distribution` explains sampling.
//!
//! stdout: each step's extensions ranked by score (kept or pruned), then
//! greedy's and beam search's answers; with `--json` one object
//! `{"greedy": {"tokens", "prob", "logprob"}, "beam": {"tokens", "prob", "logprob", "score"}}`.
//! Exit 0; a bad value (`--beam 0`, a malformed tree) is one `error:` line on
//! stderr and exit 2.

use super::common::read_json;
use anyhow::{anyhow, Context};
use constrain::sampling::{beam_search_tree, BeamTree, Hypothesis};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct BeamArgs {
    /// JSON tree: {"A": {"p": 0.40, "next": {"x": {"p": 0.50}}}, "B": {...}}.
    #[arg(long, value_name = "FILE")]
    tree: PathBuf,
    /// Beam width N >= 1 (1 = greedy).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    beam: String,
    /// Length penalty A: score = summed log-probability / length^A (default 1).
    #[arg(long = "length-penalty", value_name = "A", allow_hyphen_values = true)]
    length_penalty: Option<String>,
    /// Print JSON instead of the explanation.
    #[arg(long)]
    json: bool,
}

pub fn run(a: BeamArgs) -> anyhow::Result<ExitCode> {
    let beam: usize = a.beam.trim().parse().map_err(|_| {
        anyhow!(
            "invalid value '{}' for --beam: expected a beam width, an integer >= 1",
            a.beam
        )
    })?;
    if beam == 0 {
        return Err(anyhow!(
            "invalid value '0' for --beam: the beam width must be at least 1"
        ));
    }
    let length_penalty: f64 = match &a.length_penalty {
        None => 1.0,
        Some(s) => s
            .trim()
            .parse()
            .ok()
            .filter(|x: &f64| x.is_finite())
            .ok_or_else(|| {
                anyhow!("invalid value '{s}' for --length-penalty: expected a finite number")
            })?,
    };
    let v = read_json(&a.tree, "tree")?;
    let tree =
        BeamTree::from_json(&v).with_context(|| format!("invalid tree {}", a.tree.display()))?;
    let out = beam_search_tree(&tree, beam, length_penalty)?;

    if a.json {
        let j = serde_json::json!({
            "greedy": {
                "tokens": out.greedy.tokens,
                "prob": out.greedy.prob,
                "logprob": out.greedy.logprob,
            },
            "beam": {
                "tokens": out.beam.tokens,
                "prob": out.beam.prob,
                "logprob": out.beam.logprob,
                "score": out.beam.score,
            },
        });
        println!("{j}");
        return Ok(ExitCode::SUCCESS);
    }

    let mut s = String::new();
    s.push_str(&format!(
        "beam search, width {beam}, score = log p / length^{length_penalty}\n"
    ));
    for (i, step) in out.steps.iter().enumerate() {
        s.push_str(&format!("\nstep {}: extensions ranked by score\n", i + 1));
        for (h, kept) in &step.candidates {
            let mark = match (kept, h.complete) {
                (true, true) => "kept, complete",
                (true, false) => "kept",
                (false, _) => "pruned",
            };
            s.push_str(&format!("  {}  {mark}\n", line(h)));
        }
    }
    s.push_str(&format!(
        "\ngreedy (likeliest token each step): {}\n",
        line(&out.greedy)
    ));
    s.push_str(&format!(
        "beam (best complete sequence):      {}\n",
        line(&out.beam)
    ));
    if out.kept_greedy {
        s.push_str(
            "beam search pruned greedy's path and found only worse sequences: greedy's completion is kept\n",
        );
    } else if out.beam.tokens != out.greedy.tokens {
        s.push_str(&format!(
            "beam search found a sequence {:.3}× as likely as greedy's\n",
            out.beam.prob / out.greedy.prob
        ));
    }
    print!("{s}");
    Ok(ExitCode::SUCCESS)
}

fn line(h: &Hypothesis) -> String {
    format!(
        "{:<12} p = {:.4}  log p = {:>8.4}  score = {:>8.4}",
        h.tokens.join(" "),
        h.prob,
        h.logprob,
        h.score
    )
}
