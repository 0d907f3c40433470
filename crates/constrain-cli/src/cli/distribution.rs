//! `constrain distribution`: shows how each sampling stage shifts a small
//! distribution, for people learning what the knobs do.
//!
//! stdout: a table per active stage (probabilities with bars), or with
//! `--json` one object `{"tokens": [...], "stages": [{"stage", "probs"}], "final": [...]}`.
//! Exit 0; a bad value is one `error:` line on stderr and exit 2.

use anyhow::{anyhow, bail, Context};
use constrain::sampling::{explain, greedy, SamplingConfig, Stage};
use constrain::TokenId;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct DistributionArgs {
    /// Comma-separated logits, one per token (e.g. 6,5,4.5,3.5,2,0).
    #[arg(long, value_name = "L,...", allow_hyphen_values = true)]
    logits: String,
    /// Comma-separated token labels, one per logit (default: the ids).
    #[arg(long, value_name = "NAME,...")]
    labels: Option<String>,
    /// Temperature T >= 0 (0 = greedy; default 1).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    temperature: Option<String>,
    /// Keep the K most likely tokens (0 = off).
    #[arg(long = "top-k", value_name = "K", allow_hyphen_values = true)]
    top_k: Option<String>,
    /// Keep the smallest set whose mass reaches P, 0 < P <= 1.
    #[arg(long = "top-p", value_name = "P", allow_hyphen_values = true)]
    top_p: Option<String>,
    /// Keep tokens with p >= P × p_max, 0 <= P <= 1.
    #[arg(long = "min-p", value_name = "P", allow_hyphen_values = true)]
    min_p: Option<String>,
    /// Comma-separated ids of the tokens generated so far (for the penalties).
    #[arg(long, value_name = "ID,...", allow_hyphen_values = true)]
    history: Option<String>,
    /// Repetition penalty θ > 0 (1 = off).
    #[arg(
        long = "repetition-penalty",
        value_name = "θ",
        allow_hyphen_values = true
    )]
    repetition_penalty: Option<String>,
    /// Frequency penalty λ: subtracts count × λ.
    #[arg(
        long = "frequency-penalty",
        value_name = "λ",
        allow_hyphen_values = true
    )]
    frequency_penalty: Option<String>,
    /// Presence penalty λ: subtracts λ once a token has appeared.
    #[arg(
        long = "presence-penalty",
        value_name = "λ",
        allow_hyphen_values = true
    )]
    presence_penalty: Option<String>,
    /// Comma-separated ID=V: add V to token ID's logit (-inf forbids it).
    #[arg(
        long = "logit-bias",
        value_name = "ID=V,...",
        allow_hyphen_values = true
    )]
    logit_bias: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
}

fn number<T: std::str::FromStr>(flag: &str, s: &str, what: &str) -> anyhow::Result<T> {
    s.trim()
        .parse()
        .map_err(|_| anyhow!("invalid value '{s}' for --{flag}: expected {what}"))
}

fn list<T: std::str::FromStr>(flag: &str, s: &str, what: &str) -> anyhow::Result<Vec<T>> {
    s.split(',').map(|x| number(flag, x, what)).collect()
}

fn token_id(flag: &str, s: &str, n: usize) -> anyhow::Result<TokenId> {
    let id: u32 = number(flag, s, "a token id (a non-negative integer)")?;
    if id as usize >= n {
        bail!(
            "invalid value '{s}' for --{flag}: token id {id} is out of range (there are {n} tokens, ids 0..{})",
            n - 1
        );
    }
    Ok(TokenId(id))
}

pub fn run(a: DistributionArgs) -> anyhow::Result<ExitCode> {
    let logits: Vec<f32> = list("logits", &a.logits, "a comma-separated list of numbers")?;
    let n = logits.len();
    let labels: Vec<String> = match &a.labels {
        Some(s) => s.split(',').map(|l| l.trim().to_string()).collect(),
        None => (0..n).map(|i| i.to_string()).collect(),
    };
    if labels.len() != n {
        bail!(
            "--labels has {} labels but --logits has {n} values; give one label per logit",
            labels.len()
        );
    }
    let mut config = SamplingConfig::default();
    if let Some(s) = &a.temperature {
        config.temperature = number("temperature", s, "a number >= 0")?;
    }
    if let Some(s) = &a.top_k {
        config.top_k = number("top-k", s, "a non-negative integer (0 = off)")?;
    }
    if let Some(s) = &a.top_p {
        config.top_p = number("top-p", s, "a number in (0, 1]")?;
    }
    if let Some(s) = &a.min_p {
        config.min_p = number("min-p", s, "a number in [0, 1]")?;
    }
    if let Some(s) = &a.repetition_penalty {
        config.repetition_penalty = number("repetition-penalty", s, "a number > 0")?;
    }
    if let Some(s) = &a.frequency_penalty {
        config.frequency_penalty = number("frequency-penalty", s, "a number")?;
    }
    if let Some(s) = &a.presence_penalty {
        config.presence_penalty = number("presence-penalty", s, "a number")?;
    }
    if let Some(s) = &a.logit_bias {
        for item in s.split(',') {
            let (id, v) = item.split_once('=').ok_or_else(|| {
                anyhow!("invalid value '{item}' for --logit-bias: expected ID=V, e.g. 3=-inf")
            })?;
            let id = token_id("logit-bias", id, n)?;
            let v: f32 = number("logit-bias", v, "a number or -inf after '='")?;
            config.logit_bias.push((id, v));
        }
    }
    let history: Vec<TokenId> = match &a.history {
        Some(s) if !s.trim().is_empty() => s
            .split(',')
            .map(|x| token_id("history", x, n))
            .collect::<anyhow::Result<_>>()?,
        _ => Vec::new(),
    };
    config.validate()?;
    let e = explain(&logits, None, &history, &config).context("cannot build the distribution")?;

    if a.json {
        let stages: Vec<serde_json::Value> = e
            .stages
            .iter()
            .map(|s| serde_json::json!({"stage": s.stage.name(), "probs": s.probs}))
            .collect();
        let out = serde_json::json!({"tokens": labels, "stages": stages, "final": e.final_probs});
        println!("{out}");
        return Ok(ExitCode::SUCCESS);
    }

    let width = labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(1)
        .max(5);
    let mut out = String::new();
    for s in &e.stages {
        out.push_str(&format!("{}\n", describe(s.stage, &config)));
        table(&mut out, &labels, width, Some(&s.logits), &s.probs);
        out.push('\n');
    }
    out.push_str("final: the distribution the pick draws from\n");
    table(&mut out, &labels, width, None, &e.final_probs);
    if config.is_greedy() {
        let last = &e.stages.last().expect("explain records the logits").logits;
        if let Ok(t) = greedy(last) {
            out.push_str(&format!("greedy pick: {}\n", labels[t.as_usize()]));
        }
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

fn describe(stage: Stage, c: &SamplingConfig) -> String {
    match stage {
        Stage::Logits => "logits: softmax of the logits as given".into(),
        Stage::Mask => "mask: disallowed tokens removed".into(),
        Stage::LogitBias => "logit_bias: bias added to the listed tokens".into(),
        Stage::Penalties => format!(
            "penalties over the history: repetition θ = {}, frequency λ = {}, presence λ = {}",
            c.repetition_penalty, c.frequency_penalty, c.presence_penalty
        ),
        Stage::Temperature if c.temperature == 0.0 => {
            "temperature: T = 0, greedy: only the argmax is left".into()
        }
        Stage::Temperature => format!(
            "temperature: logits divided by T = {} ({})",
            c.temperature,
            if c.temperature < 1.0 {
                "sharper"
            } else {
                "flatter"
            }
        ),
        Stage::TopK => format!("top_k: keep the {} most likely, renormalise", c.top_k),
        Stage::TopP => format!(
            "top_p: keep the smallest set whose mass reaches {}, renormalise",
            c.top_p
        ),
        Stage::MinP => format!(
            "min_p: keep tokens with p >= {} × p_max, renormalise",
            c.min_p
        ),
    }
}

fn table(out: &mut String, labels: &[String], width: usize, logits: Option<&[f32]>, probs: &[f32]) {
    const BAR: usize = 40;
    for (i, (l, &p)) in labels.iter().zip(probs).enumerate() {
        let logit = match logits.map(|ls| ls[i]) {
            Some(x) if x == f32::NEG_INFINITY || x.is_nan() => "removed".to_string(),
            Some(x) => format!("{x:.3}"),
            None => String::new(),
        };
        let eighths = (p as f64 * (BAR * 8) as f64).round() as usize;
        let mut bar = "█".repeat(eighths / 8);
        if eighths % 8 > 0 {
            bar.push([' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'][eighths % 8]);
        } else if eighths == 0 && p > 0.0 {
            bar.push('▏');
        }
        out.push_str(&format!(
            "  {l:<width$}  {logit:>8}  {:>6.2}%  {bar}\n",
            p * 100.0
        ));
    }
}
