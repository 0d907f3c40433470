//! `constrain distribution`: shows how each sampling stage shifts a small
//! distribution, for people learning what the knobs do.
//!
//! stdout: a table per active stage (probabilities with bars), or with
//! `--json` one object `{"tokens": [...], "stages": [{"stage", "probs"}], "final": [...]}`.
//! Exit 0; a bad value is one `error:` line on stderr and exit 2.

use anyhow::{anyhow, bail, Context};
use constrain::sampling::{
    classifier_free_guidance, explain, greedy, speculation, SamplingConfig, Speculation, Stage,
};
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
    /// Speculative sampling: the draft model's logits (same width). Shows each
    /// token's acceptance probability min(1, p_target/p_draft) and the
    /// residual max(0, p_target − p_draft) a rejection draws from.
    #[arg(
        long = "draft-logits",
        value_name = "L,...",
        allow_hyphen_values = true
    )]
    draft_logits: Option<String>,
    /// Classifier-free guidance: the unconditional (negative-prompt) logits;
    /// the pipeline runs on uncond + G·(logits − uncond).
    #[arg(
        long = "uncond-logits",
        value_name = "L,...",
        allow_hyphen_values = true,
        requires = "guidance_scale"
    )]
    uncond_logits: Option<String>,
    /// Guidance scale G (1 = plain decoding).
    #[arg(
        long = "guidance-scale",
        value_name = "G",
        allow_hyphen_values = true,
        requires = "uncond_logits"
    )]
    guidance_scale: Option<String>,
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
    let same_width = |flag: &str, v: &[f32]| -> anyhow::Result<()> {
        if v.len() != n {
            bail!(
                "--{flag} has {} values but --logits has {n}; give one per token",
                v.len()
            );
        }
        Ok(())
    };
    // Guidance first: it combines two passes into the logits the pipeline sees.
    let guidance = match (&a.uncond_logits, &a.guidance_scale) {
        (Some(u), Some(g)) => {
            let uncond: Vec<f32> = list("uncond-logits", u, "a comma-separated list of numbers")?;
            same_width("uncond-logits", &uncond)?;
            let scale: f32 = number("guidance-scale", g, "a finite number (1 = no guidance)")?;
            if !scale.is_finite() {
                bail!("invalid value '{g}' for --guidance-scale: expected a finite number (1 = no guidance)");
            }
            let guided = classifier_free_guidance(&logits, &uncond, scale)?;
            Some((uncond, scale, guided))
        }
        _ => None,
    };
    let cond = logits.clone();
    let logits = guidance.as_ref().map_or(logits, |g| g.2.clone());
    let e = explain(&logits, None, &history, &config).context("cannot build the distribution")?;
    // Speculative: the draft runs through the same pipeline (same config,
    // history, guidance not applied to it).
    let spec = match &a.draft_logits {
        Some(d) => {
            let draft: Vec<f32> = list("draft-logits", d, "a comma-separated list of numbers")?;
            same_width("draft-logits", &draft)?;
            let ed = explain(&draft, None, &history, &config)
                .context("cannot build the draft distribution")?;
            let s = speculation(&e.final_probs, &ed.final_probs)?;
            Some((ed.final_probs, s))
        }
        None => None,
    };

    if a.json {
        let stages: Vec<serde_json::Value> = e
            .stages
            .iter()
            .map(|s| serde_json::json!({"stage": s.stage.name(), "probs": s.probs}))
            .collect();
        let mut out =
            serde_json::json!({"tokens": labels, "stages": stages, "final": e.final_probs});
        if let Some((uncond, scale, guided)) = &guidance {
            let p = |l: &[f32]| constrain::sampling::probabilities(l).ok();
            out["guidance"] = serde_json::json!({
                "scale": scale,
                "cond": p(&cond),
                "uncond": p(uncond),
                "guided_logits": guided.iter().map(|&x| if x.is_finite() { Some(x) } else { None }).collect::<Vec<_>>(),
                "guided": p(guided),
            });
        }
        if let Some((draft, s)) = &spec {
            out["speculative"] = serde_json::json!({
                "target": e.final_probs,
                "draft": draft,
                "acceptance": s.acceptance,
                "residual": s.residual,
                "acceptance_rate": s.acceptance_rate,
            });
        }
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
    if let Some((uncond, scale, guided)) = &guidance {
        out.push_str(&format!(
            "guidance: classifier-free, uncond + G·(cond − uncond) with G = {scale}\n"
        ));
        out.push_str("  cond (the logits as given)\n");
        table(
            &mut out,
            &labels,
            width,
            Some(&cond),
            &constrain::sampling::probabilities(&cond)?,
        );
        out.push_str("  uncond (the negative prompt's logits)\n");
        table(
            &mut out,
            &labels,
            width,
            Some(uncond),
            &constrain::sampling::probabilities(uncond)?,
        );
        out.push_str("  guided: what the pipeline below starts from\n");
        table(
            &mut out,
            &labels,
            width,
            Some(guided),
            &constrain::sampling::probabilities(guided)?,
        );
        out.push('\n');
    }
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
    if let Some((draft, s)) = &spec {
        speculative_tables(&mut out, &labels, width, &e.final_probs, draft, s);
    }
    print!("{out}");
    Ok(ExitCode::SUCCESS)
}

fn speculative_tables(
    out: &mut String,
    labels: &[String],
    width: usize,
    target: &[f32],
    draft: &[f32],
    s: &Speculation,
) {
    out.push_str("\nspeculative sampling: the draft proposes x ~ p_draft, the target accepts it with min(1, p_target/p_draft)\n");
    out.push_str(&format!(
        "  {:<width$}  {:>8}  {:>8}  {:>10}  {:>8}\n",
        "token", "p_target", "p_draft", "acceptance", "residual"
    ));
    for (i, l) in labels.iter().enumerate() {
        let acc = if draft[i] > 0.0 {
            format!("{:.2}%", s.acceptance[i] * 100.0)
        } else {
            "never".to_string()
        };
        out.push_str(&format!(
            "  {l:<width$}  {:>7.2}%  {:>7.2}%  {acc:>10}  {:>7.2}%\n",
            target[i] * 100.0,
            draft[i] * 100.0,
            s.residual[i] * 100.0
        ));
    }
    out.push_str(&format!(
        "a draft is accepted with probability Σ min(p_target, p_draft) = {:.2}%; on rejection the token is drawn from the residual max(0, p_target − p_draft), normalised, so the output follows p_target exactly\n",
        s.acceptance_rate * 100.0
    ));
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
