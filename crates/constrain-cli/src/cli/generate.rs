//! The main job (no subcommand): constrained generation with a real model.
//!
//! `constrain --schema FILE --prompt TEXT` prints one JSON document valid for
//! the schema on stdout (newline-terminated); `--regex`, `--grammar` and
//! `--tools` are the other constraint sources. stdout carries only the
//! generated text, buffered and written at the end unless `--stream`; model
//! loading, index building and a one-line summary go to stderr. Bad input is
//! one `error:` line and exit code 2, with nothing on stdout.

use super::common::{constrain_home, read_json};
use anyhow::{bail, Context};
use constrain::sampling::SamplingConfig;
use constrain::vocab::TokenId;
use constrain::{CompileError, Source};
use constrain_model::generate::{
    Engine, GenerateConfig, GenerateError, Guidance, SpeculativeConfig, StopReason,
};
use constrain_model::trace::Trace;
use constrain_model::{self as model, prompt, TokenizerSource};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// Default model file name under `$CONSTRAIN_HOME`.
pub const DEFAULT_MODEL: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    /// JSON Schema file: the output is one JSON document valid for it.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["regex", "grammar", "tools", "structural_tag"])]
    schema: Option<PathBuf>,
    /// Regex the whole output must match.
    #[arg(long, value_name = "RE", conflicts_with_all = ["grammar", "tools", "structural_tag"])]
    regex: Option<String>,
    /// Grammar file: GBNF (`*.gbnf`, llama.cpp's format), Lark (`*.lark`,
    /// llguidance's dialect) or a regex file (`grammars/*.regex`).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["tools", "structural_tag"])]
    grammar: Option<PathBuf>,
    /// XGrammar structural tag (JSON file): free text, reasoning and tool
    /// calls in one language (`{"type": "structural_tag", "format": ...}`).
    #[arg(long, value_name = "FILE", conflicts_with = "tools")]
    structural_tag: Option<PathBuf>,
    /// OpenAI-style `tools` array (JSON file): the output is
    /// `{"name": ..., "arguments": {...}}` valid for exactly one tool.
    #[arg(long, value_name = "FILE")]
    tools: Option<PathBuf>,
    /// With --tools: the output is free text and calls in the model's own
    /// format (a structural tag): `auto` (text, calls, or both), `required`
    /// (it begins with a call), `none` (text only), or a function's name.
    #[arg(long, value_name = "CHOICE", requires = "tools")]
    tool_choice: Option<String>,
    /// With --tools: the model's call format (`qwen_3`, `llama`, `mistral`,
    /// `qwen_3_coder`); default: the one the model's chat template writes
    /// (read from the GGUF), else `qwen_3`.
    #[arg(long, value_name = "NAME", requires = "tools")]
    tool_format: Option<String>,
    /// With --tools: at most one call (`parallel_tool_calls: false`).
    #[arg(long, requires = "tools")]
    one_call: bool,
    /// The output begins with the model's thinking, closed by `</think>`
    /// (the prompt opens `<think>`); nothing constrains the thinking.
    #[arg(long, requires = "tools")]
    reasoning: bool,
    /// With --reasoning: at most N tokens of thinking; then only the
    /// tokens that close it (`</think>`) are allowed.
    #[arg(long, value_name = "N", requires = "reasoning")]
    thinking_budget: Option<u32>,
    /// The user message.
    #[arg(long, value_name = "TEXT")]
    prompt: Option<String>,
    /// System message (default: one that shows the schema / tools / regex).
    #[arg(long, value_name = "TEXT", conflicts_with = "raw")]
    system: Option<String>,
    /// Feed the prompt as is, without the ChatML template.
    #[arg(long)]
    raw: bool,
    /// GGUF model (default: $CONSTRAIN_HOME/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf).
    #[arg(long, value_name = "FILE")]
    model: Option<PathBuf>,
    /// tokenizer.json (default: the tokenizer stored in the GGUF file).
    #[arg(long, value_name = "FILE")]
    tokenizer: Option<PathBuf>,
    /// Most tokens generated; the output is always complete within it.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// Sampling temperature (0 = greedy).
    #[arg(long, conflicts_with = "greedy")]
    temperature: Option<f32>,
    /// Keep the k most likely tokens (0 = off).
    #[arg(long)]
    top_k: Option<usize>,
    /// Nucleus sampling threshold (1 = off).
    #[arg(long)]
    top_p: Option<f32>,
    /// Drop tokens below min_p × the top probability (0 = off).
    #[arg(long)]
    min_p: Option<f32>,
    /// Repetition penalty (1 = off).
    #[arg(long)]
    repetition_penalty: Option<f32>,
    /// Frequency penalty (0 = off).
    #[arg(long)]
    frequency_penalty: Option<f32>,
    /// Presence penalty (0 = off).
    #[arg(long)]
    presence_penalty: Option<f32>,
    /// Penalties look at the last N generated tokens only (default: all).
    #[arg(long, value_name = "N")]
    penalty_last_n: Option<usize>,
    /// Logit biases: `ID=V,ID=V...`.
    #[arg(long, value_name = "ID=V,...")]
    logit_bias: Option<String>,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Greedy decoding (argmax over the allowed tokens).
    #[arg(long)]
    greedy: bool,
    /// Write tokens to stdout as they are generated.
    #[arg(long)]
    stream: bool,
    /// CPU threads for the model (default: physical cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Do not append forced continuations without sampling.
    #[arg(long)]
    no_jump_forward: bool,
    /// Compute each step's mask after the model's pass instead of during it
    /// (the output is the same; for measuring what the overlap saves).
    #[arg(long)]
    no_mask_overlap: bool,
    /// Write the step trace (JSON: model, prompt, settings, steps,
    /// sequence_logprob) to FILE; stdout is unchanged. `constrain view FILE`
    /// renders it. Combines with every strategy: with --draft-model the
    /// steps show the target's logits, with --guidance-scale or
    /// --contrastive-model the guided logits, with --beam the winning
    /// hypothesis's steps and its score (fields score and length_penalty;
    /// score = sequence_logprob / steps^A).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Constrained beam search with N beams (1 = greedy): the likeliest
    /// complete output, scored by summed log-probability / length^A. The
    /// output is written once the search ends (--stream has nothing to
    /// stream early); sampling options do not apply. Not with --draft-model
    /// (a draft speeds up drawing one sequence; beam search draws none) nor
    /// with guidance (not built: it needs a second sequence per hypothesis;
    /// docs/decoding.md lists the strategies that combine).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    beam: Option<usize>,
    /// Length penalty A for --beam (default 1, as Hugging Face).
    #[arg(
        long = "length-penalty",
        value_name = "A",
        requires = "beam",
        allow_hyphen_values = true
    )]
    length_penalty: Option<f32>,
    /// Speculative decoding: a smaller GGUF model with the same vocabulary
    /// drafts tokens under the constraint and this model verifies them in
    /// one pass (the output follows this model's distribution; under
    /// --greedy it is exactly its output). llama.cpp's --model-draft.
    #[arg(
        long = "draft-model",
        visible_alias = "model-draft",
        value_name = "FILE",
        conflicts_with_all = ["beam", "guidance_scale", "contrastive_model"]
    )]
    draft_model: Option<PathBuf>,
    /// Tokens the draft proposes per step, K >= 1 (default 4). llama.cpp's
    /// --draft-max.
    #[arg(
        long = "draft-tokens",
        visible_alias = "draft-max",
        value_name = "K",
        requires = "draft_model",
        allow_hyphen_values = true
    )]
    draft_tokens: Option<usize>,
    /// Always draft K tokens per round (where the output allows). By
    /// default each round's draft length is chosen in 0..=K from the
    /// measured cost of a draft pass and of a verification pass and the
    /// acceptance rate so far, 0 meaning a plain step of the model.
    #[arg(long = "draft-fixed", requires = "draft_model")]
    draft_fixed: bool,
    /// Classifier-free guidance scale G: logits_uncond + G (logits_cond -
    /// logits_uncond), the unconditional pass on --negative-prompt (1 = off:
    /// no second pass).
    #[arg(
        long = "guidance-scale",
        value_name = "G",
        allow_hyphen_values = true,
        conflicts_with_all = ["beam", "contrastive_model"]
    )]
    guidance_scale: Option<f32>,
    /// The user message of the unconditional pass of --guidance-scale
    /// (default empty; same system message and template as the prompt).
    #[arg(
        long = "negative-prompt",
        value_name = "TEXT",
        requires = "guidance_scale"
    )]
    negative_prompt: Option<String>,
    /// Contrastive decoding: this (expert) model's log-probabilities minus
    /// the amateur FILE's (a smaller GGUF model with the same vocabulary).
    #[arg(
        long = "contrastive-model",
        value_name = "FILE",
        conflicts_with = "beam"
    )]
    contrastive_model: Option<PathBuf>,
    /// Plausibility threshold A of --contrastive-model, in [0, 1]: only
    /// tokens with expert probability >= A x the best allowed one compete
    /// (default 0.1).
    #[arg(
        long = "contrastive-alpha",
        value_name = "A",
        requires = "contrastive_model",
        allow_hyphen_values = true
    )]
    contrastive_alpha: Option<f32>,
    #[command(flatten)]
    schema_opts: super::schema_args::SchemaArgs,
}

/// Default `--draft-tokens`.
pub const DEFAULT_DRAFT_TOKENS: usize = 4;
/// Default `--contrastive-alpha` (Li et al. 2023).
pub const DEFAULT_CONTRASTIVE_ALPHA: f32 = 0.1;

/// A constraint, with its label for errors and the default system message.
struct Constraint {
    source: Source,
    what: String,
    system: String,
}

/// The call format of the model's chat template (the GGUF's
/// `tokenizer.chat_template`, read without loading the weights), or Qwen 3's
/// where the file or its template says none.
fn model_tool_format(a: &GenerateArgs) -> constrain::tools::ToolFormat {
    let path = a
        .model
        .clone()
        .unwrap_or_else(|| constrain_home().join(DEFAULT_MODEL));
    let detected = constrain_model::gguf::GgufFile::open(&path)
        .ok()
        .and_then(|g| {
            g.string("tokenizer.chat_template")
                .ok()
                .and_then(constrain::tools::ToolFormat::from_chat_template)
        });
    match detected {
        Some(f) => {
            eprintln!("tool format: {} (from the model's chat template)", f.name());
            f
        }
        None => constrain::tools::ToolFormat::Qwen3,
    }
}

fn constraint(a: &GenerateArgs) -> anyhow::Result<Constraint> {
    let opts = a.schema_opts.options();
    if let Some(p) = &a.schema {
        let s = a.schema_opts.prepare(read_json(p, "schema")?, p)?;
        return Ok(Constraint {
            system: prompt::schema_system_message(&s),
            source: Source::json_schema(s).with_schema_options(opts),
            what: format!("invalid schema {}", p.display()),
        });
    }
    if let (Some(p), true) = (
        &a.tools,
        a.tool_choice.is_some() || a.tool_format.is_some() || a.one_call || a.reasoning,
    ) {
        use constrain::tools::{Reasoning, ToolChoice, ToolFormat};
        let tools = read_json(p, "tools file")?;
        let list = tools.as_array().cloned().unwrap_or_default();
        let format = match &a.tool_format {
            None => model_tool_format(a),
            Some(n) => ToolFormat::from_name(n).ok_or_else(|| {
                let names: Vec<&str> = ToolFormat::ALL.iter().map(|f| f.name()).collect();
                anyhow::anyhow!(
                    "unknown --tool-format {n:?}; expected one of {}",
                    names.join(", ")
                )
            })?,
        };
        let choice = match a.tool_choice.as_deref() {
            None => ToolChoice::Auto,
            Some(c) => ToolChoice::from_name(c).ok_or_else(|| {
                anyhow::anyhow!("--tool-choice needs auto, required, none or a name")
            })?,
        };
        let reasoning = if a.reasoning {
            Reasoning::Enabled
        } else {
            Reasoning::Disabled
        };
        let tag = constrain::tools::structural_tag_with_budget(
            format,
            &tools,
            &choice,
            !a.one_call,
            reasoning,
            a.thinking_budget,
        )
        .with_context(|| format!("invalid tools file {}", p.display()))?;
        return Ok(Constraint {
            system: prompt::tool_calls_system_message(&list),
            source: Source::StructuralTag {
                tag,
                options: a.schema_opts.tag_options(),
            },
            what: format!("invalid tools file {}", p.display()),
        });
    }
    if let Some(p) = &a.tools {
        let tools = read_json(p, "tools file")?;
        let list = tools.as_array().cloned().unwrap_or_default();
        return Ok(Constraint {
            system: prompt::tools_system_message(&list),
            source: Source::tools(tools).with_schema_options(opts),
            what: format!("invalid tools file {}", p.display()),
        });
    }
    if let Some(re) = &a.regex {
        return Ok(Constraint {
            system: prompt::regex_system_message(re),
            source: Source::regex(re.clone()),
            what: "regex".into(),
        });
    }
    if let Some(p) = &a.grammar {
        return Ok(match constrain::grammar::load(p)? {
            constrain::grammar::GrammarFile::Regex(g) => Constraint {
                system: prompt::regex_system_message(&g.pattern),
                source: Source::Grammar(g),
                what: format!("grammar {}", p.display()),
            },
            constrain::grammar::GrammarFile::Gbnf(grammar) => Constraint {
                system: format!(
                    "{}\nRespond only with text that this grammar (GBNF, rule `root`) accepts:\n{}",
                    prompt::QWEN_DEFAULT_SYSTEM,
                    grammar.text.trim_end()
                ),
                source: Source::Gbnf {
                    grammar,
                    options: Default::default(),
                }
                .with_schema_options(opts),
                what: format!("grammar {}", p.display()),
            },
            constrain::grammar::GrammarFile::Lark(grammar) => Constraint {
                system: format!(
                    "{}\nRespond only with text that this grammar (Lark, rule `start`) accepts:\n{}",
                    prompt::QWEN_DEFAULT_SYSTEM,
                    grammar.text.trim_end()
                ),
                source: Source::Lark {
                    grammar,
                    options: Default::default(),
                }
                .with_schema_options(opts),
                what: format!("grammar {}", p.display()),
            },
        });
    }
    if let Some(p) = &a.structural_tag {
        return Ok(Constraint {
            system: prompt::QWEN_DEFAULT_SYSTEM.to_string(),
            source: super::common::structural_tag(p, &a.schema_opts)?,
            what: format!("structural tag {}", p.display()),
        });
    }
    bail!(
        "give one of --schema, --regex, --grammar, --tools, --structural-tag (and --prompt); see `constrain --help`"
    )
}

fn sampling(a: &GenerateArgs) -> anyhow::Result<SamplingConfig> {
    let mut s = if a.greedy {
        SamplingConfig::greedy()
    } else {
        SamplingConfig::default()
    };
    if let Some(v) = a.temperature {
        s.temperature = v;
    }
    if let Some(v) = a.top_k {
        s.top_k = v;
    }
    if let Some(v) = a.top_p {
        s.top_p = v;
    }
    if let Some(v) = a.min_p {
        s.min_p = v;
    }
    if let Some(v) = a.repetition_penalty {
        s.repetition_penalty = v;
    }
    if let Some(v) = a.frequency_penalty {
        s.frequency_penalty = v;
    }
    if let Some(v) = a.presence_penalty {
        s.presence_penalty = v;
    }
    if a.penalty_last_n.is_some() {
        s.penalty_last_n = a.penalty_last_n;
    }
    if let Some(b) = &a.logit_bias {
        s.logit_bias = parse_logit_bias(b)?;
    }
    s.validate().context("invalid sampling options")?;
    Ok(s)
}

/// Parses `ID=V,ID=V...`.
pub fn parse_logit_bias(s: &str) -> anyhow::Result<Vec<(TokenId, f32)>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (id, v) = part
            .split_once('=')
            .with_context(|| format!("--logit-bias entry {part:?} is not ID=VALUE"))?;
        let id: u32 = id
            .trim()
            .parse()
            .with_context(|| format!("--logit-bias entry {part:?}: {id:?} is not a token id"))?;
        let v: f32 = v
            .trim()
            .parse()
            .with_context(|| format!("--logit-bias entry {part:?}: {v:?} is not a number"))?;
        if v.is_nan() {
            bail!("--logit-bias entry {part:?}: the bias is NaN");
        }
        out.push((TokenId(id), v));
    }
    Ok(out)
}

pub fn run(a: GenerateArgs) -> anyhow::Result<ExitCode> {
    // Cheap checks first: nothing slow runs on bad input.
    let user = a.prompt.clone().context(
        "no --prompt given (the main job is `constrain --schema FILE --prompt TEXT`; see `constrain --help`)",
    )?;
    let c = constraint(&a)?;
    // A bad --regex fails here, not after the model has loaded (its size is
    // left to the compile, which knows the configured limits).
    if let Source::Regex(re) = &c.source {
        if let Err(e @ constrain::DfaError::Syntax { .. }) =
            constrain::ByteDfa::nfa(re, &constrain::DfaConfig::default())
        {
            return Err(e.into());
        }
    }
    let sampling = sampling(&a)?;
    if a.beam == Some(0) {
        bail!("invalid value '0' for --beam: the beam width must be at least 1");
    }
    if let Some(x) = a.length_penalty.filter(|x| !x.is_finite()) {
        bail!("invalid value '{x}' for --length-penalty: expected a finite number");
    }
    if a.draft_tokens == Some(0) {
        bail!("invalid value '0' for --draft-tokens: the draft must propose at least 1 token");
    }
    if let Some(g) = a.guidance_scale.filter(|g| !g.is_finite()) {
        bail!("invalid value '{g}' for --guidance-scale: expected a finite number");
    }
    if let Some(x) = a.contrastive_alpha.filter(|x| !(0.0..=1.0).contains(x)) {
        bail!("invalid value '{x}' for --contrastive-alpha: expected a number in [0, 1]");
    }
    for (p, flag) in [
        (&a.draft_model, "--draft-model"),
        (&a.contrastive_model, "--contrastive-model"),
    ] {
        if let Some(p) = p.as_ref().filter(|p| !p.is_file()) {
            bail!("{flag} file {} does not exist", p.display());
        }
    }
    if let Some(n) = a.threads {
        model::set_threads(n)?;
    }
    // Open the trace file now, so a bad path fails before the model loads.
    let mut trace_file = match &a.trace {
        Some(p) => Some(
            std::fs::File::create(p)
                .with_context(|| format!("cannot write --trace file {}", p.display()))?,
        ),
        None => None,
    };
    let model_path = a
        .model
        .clone()
        .unwrap_or_else(|| constrain_home().join(DEFAULT_MODEL));
    let tok_src = match &a.tokenizer {
        Some(p) => TokenizerSource::Json(p.clone()),
        None => TokenizerSource::Gguf,
    };

    // The second model first: a bad one fails before the big one loads.
    let mut second = match (&a.draft_model, &a.contrastive_model) {
        (Some(p), _) => Some(load_second(p, "draft")?),
        (None, Some(p)) => Some(load_second(p, "amateur")?),
        _ => None,
    };
    let t = Instant::now();
    eprintln!("loading model {} ...", model_path.display());
    let mut engine = Engine::load(&model_path, &tok_src)?;
    if let (Some(s), Some(p)) = (
        &second,
        a.draft_model.as_ref().or(a.contrastive_model.as_ref()),
    ) {
        same_vocabulary(engine.vocab(), &s.vocab, p, s.role)?;
    }
    let width = engine.vocab().logits_width();
    if let Some(&(t, _)) = sampling
        .logit_bias
        .iter()
        .find(|(t, _)| t.as_usize() >= width)
    {
        bail!("--logit-bias token {t} is outside the model's {width} logits");
    }
    eprintln!(
        "loaded {} model in {:.1} s ({} threads)",
        engine.model().architecture().name(),
        t.elapsed().as_secs_f64(),
        model::threads()
    );
    let t = Instant::now();
    eprintln!("building token index ...");
    let compiled = engine.compile(&c.source).map_err(|e| match e {
        GenerateError::Compile(CompileError::Schema(_) | CompileError::Gbnf(_)) => {
            anyhow::Error::new(e).context(c.what)
        }
        e => e.into(),
    })?;
    for w in compiled.warnings() {
        eprintln!("warning: {w}");
    }
    let index = compiled.index().clone();
    eprintln!(
        "built index in {:.2} s ({} states)",
        t.elapsed().as_secs_f64(),
        index.num_states()
    );
    let system = a.system.clone().unwrap_or(c.system);
    let prompt = engine.prompt_tokens(&user, Some(&system), a.raw)?;
    let config = GenerateConfig::default()
        .max_tokens(a.max_tokens)
        .sampling(sampling)
        .seed(a.seed)
        .jump_forward(!a.no_jump_forward)
        .ignore_eos(false)
        .mask_overlap(!a.no_mask_overlap);
    if let Some(beams) = a.beam {
        let trace = trace_file.as_mut().map(|f| TraceOut {
            file: f,
            model: model_path.display().to_string(),
            user: &user,
        });
        return run_beam(&mut engine, &prompt, index, beams, &a, &config, trace);
    }
    // Classifier-free guidance runs its unconditional sequence on a second
    // copy of the model (its own KV cache); G = 1 needs none.
    let mut uncond = match a.guidance_scale {
        Some(g) if g != 1.0 => {
            eprintln!("loading the unconditional copy of the model ...");
            Some(model::load(&model_path, &tok_src)?.model)
        }
        _ => None,
    };
    let negative = match (&uncond, &a.negative_prompt) {
        (Some(_), n) => engine.prompt_tokens(n.as_deref().unwrap_or(""), Some(&system), a.raw)?,
        _ => Vec::new(),
    };
    let stdout = std::io::stdout();
    let mut sink = stdout.lock();
    let mut stream_err = None;
    let stream = a.stream;
    let mut on_bytes = |b: &[u8]| {
        if stream && stream_err.is_none() {
            if let Err(e) = sink.write_all(b).and_then(|_| sink.flush()) {
                stream_err = Some(e);
            }
        }
    };
    let t_gen = Instant::now();
    let tracing = trace_file.is_some();
    let (out, steps) = if let (Some(s), true) = (second.as_mut(), a.draft_model.is_some()) {
        let mut spec = SpeculativeConfig::default()
            .draft_tokens(a.draft_tokens.unwrap_or(DEFAULT_DRAFT_TOKENS));
        spec.adaptive = !a.draft_fixed;
        if tracing {
            let (o, st) = engine.generate_speculative_traced(
                &mut s.model,
                &prompt,
                Some(index),
                &config,
                &spec,
                &mut on_bytes,
            )?;
            (o, Some(st))
        } else {
            let o = engine.generate_speculative(
                &mut s.model,
                &prompt,
                Some(index),
                &config,
                &spec,
                &mut on_bytes,
            )?;
            (o, None)
        }
    } else if second.is_some() || uncond.is_some() {
        let guidance = match (second.as_mut(), uncond.as_mut()) {
            (Some(s), _) => Guidance::Contrastive {
                amateur: &mut s.model,
                alpha: a.contrastive_alpha.unwrap_or(DEFAULT_CONTRASTIVE_ALPHA),
            },
            (None, Some(u)) => Guidance::ClassifierFree {
                uncond: u,
                negative_prompt: negative,
                scale: a.guidance_scale.unwrap_or(1.0),
            },
            (None, None) => unreachable!("checked above"),
        };
        if tracing {
            let (o, st) = engine.generate_guided_traced(
                &prompt,
                Some(index),
                &config,
                guidance,
                &mut on_bytes,
            )?;
            (o, Some(st))
        } else {
            let o =
                engine.generate_guided(&prompt, Some(index), &config, guidance, &mut on_bytes)?;
            (o, None)
        }
    } else if tracing {
        let (o, st) = engine.generate_traced(&prompt, Some(index), &config, &mut on_bytes)?;
        (o, Some(st))
    } else {
        let o = engine.generate(&prompt, Some(index), &config, &mut on_bytes)?;
        (o, None)
    };
    if let (Some(f), Some(steps)) = (trace_file.as_mut(), steps) {
        let trace = Trace::new(
            model_path.display().to_string(),
            user.clone(),
            settings_json(&a, &config),
            steps,
        );
        write_trace(f, &a, &trace)?;
    }
    let wall = t_gen.elapsed();
    if let Some(e) = stream_err {
        return Err(e).context("cannot write to stdout");
    }
    if !out.accepted {
        bail!(
            "the output is incomplete after {} tokens: {:?}",
            out.tokens.len(),
            out.text()
        );
    }
    if !stream {
        sink.write_all(&out.bytes)?;
    }
    sink.write_all(b"\n")?;
    sink.flush()?;
    let s = &out.stats;
    eprintln!(
        "{} tokens ({} forced, {}), prompt {} tokens, prefill {:.1} tok/s, decode {:.1} tok/s",
        s.generated_tokens,
        s.forced_tokens,
        match out.stop {
            StopReason::Complete => "complete",
            StopReason::MaxTokens => "max tokens",
        },
        s.prompt_tokens,
        s.prefill_tokens_per_sec(),
        s.decode_tokens_per_sec()
    );
    if s.mask.steps > 0 {
        let m = &s.mask;
        eprintln!(
            "masks: {}/{} steps waited for their mask ({:.1}%), {:.2} ms in all, longest {:.3} ms (overlap {})",
            m.waited,
            m.steps,
            100.0 * m.waited_share(),
            m.wait_time.as_secs_f64() * 1e3,
            m.max_wait.as_secs_f64() * 1e3,
            if a.no_mask_overlap { "off" } else { "on" }
        );
    }
    if let Some(sp) = &s.speculative {
        eprintln!(
            "speculative: accepted {}/{} draft tokens ({:.1}%), mean accepted length {:.2}",
            sp.accepted,
            sp.drafted,
            100.0 * sp.acceptance_rate(),
            sp.mean_accepted_length()
        );
        eprintln!(
            "speculative: {} verification passes, {} draft passes, {:.2} s drafting, {:.2} s verifying, {:.1} tok/s overall ({:.2} s)",
            sp.rounds,
            sp.draft_calls,
            sp.draft_time.as_secs_f64(),
            sp.verify_time.as_secs_f64(),
            s.generated_tokens as f64 / wall.as_secs_f64().max(1e-9),
            wall.as_secs_f64()
        );
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        eprintln!(
            "speculative: {} plain steps; draft prefill {:.0} ms; draft passes {:.0} ms ({:.1} ms each); target passes {:.0} ms over {} positions; masks, sampling and acceptance {:.0} ms",
            sp.plain_steps,
            ms(sp.draft_prefill_time),
            ms(sp.draft_model_time),
            ms(sp.draft_pass_time()),
            ms(sp.target_model_time),
            sp.target_positions,
            ms(sp.overhead_time())
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A draft or amateur model, loaded with its own tokenizer.
struct Second {
    model: model::QwenModel,
    vocab: std::sync::Arc<constrain::vocab::Vocabulary>,
    role: &'static str,
}

fn load_second(path: &std::path::Path, role: &'static str) -> anyhow::Result<Second> {
    let t = Instant::now();
    eprintln!("loading {role} model {} ...", path.display());
    let l = model::load(path, &TokenizerSource::Gguf)
        .with_context(|| format!("cannot load the {role} model"))?;
    eprintln!("loaded {role} model in {:.1} s", t.elapsed().as_secs_f64());
    Ok(Second {
        model: l.model,
        vocab: l.vocab,
        role,
    })
}

/// The second model must share the model's vocabulary: the same logits
/// width, the same token bytes id for id, the same EOS ids.
fn same_vocabulary(
    main: &constrain::vocab::Vocabulary,
    other: &constrain::vocab::Vocabulary,
    path: &std::path::Path,
    role: &str,
) -> anyhow::Result<()> {
    let what = format!(
        "the {role} model {} does not share the model's vocabulary",
        path.display()
    );
    if main.logits_width() != other.logits_width() {
        bail!(
            "{what}: it has {} logits, the model {}",
            other.logits_width(),
            main.logits_width()
        );
    }
    if let Some(((t, a), (_, b))) = main
        .text_tokens()
        .zip(other.text_tokens())
        .find(|((t, a), (u, b))| t != u || a != b)
    {
        bail!(
            "{what}: token {t} is {:?} in the model, {:?} in the {role}",
            String::from_utf8_lossy(a),
            String::from_utf8_lossy(b)
        );
    }
    if main.text_tokens().count() != other.text_tokens().count() || main.eos() != other.eos() {
        bail!("{what}: the token counts or end-of-sequence ids differ");
    }
    Ok(())
}

/// Writes `trace` to the `--trace` file `f`.
fn write_trace(f: &mut std::fs::File, a: &GenerateArgs, trace: &Trace) -> anyhow::Result<()> {
    let path = a.trace.as_deref().unwrap_or(std::path::Path::new("-"));
    serde_json::to_writer_pretty(&mut *f, trace)
        .map_err(anyhow::Error::from)
        .and_then(|_| f.write_all(b"\n").map_err(anyhow::Error::from))
        .with_context(|| format!("cannot write --trace file {}", path.display()))
}

/// Where `--beam` writes its trace, and what the trace names.
struct TraceOut<'a> {
    file: &'a mut std::fs::File,
    model: String,
    user: &'a str,
}

/// `--beam N`: the search, the output on stdout, a summary on stderr; with
/// `--trace`, the winning hypothesis's steps and score.
fn run_beam<M: model::LanguageModel>(
    engine: &mut Engine<M>,
    prompt: &[TokenId],
    index: std::sync::Arc<constrain::TokenIndex>,
    beams: usize,
    a: &GenerateArgs,
    config: &GenerateConfig,
    trace: Option<TraceOut<'_>>,
) -> anyhow::Result<ExitCode> {
    let bc = model::generate::BeamConfig::default()
        .beams(beams)
        .length_penalty(a.length_penalty.unwrap_or(1.0))
        .max_tokens(config.max_tokens)
        .jump_forward(config.jump_forward);
    let out = match trace {
        Some(t) => {
            let (out, steps) = engine.beam_search_traced(prompt, index, &bc)?;
            let trace = Trace::new(t.model, t.user, settings_json(a, config), steps)
                .with_score(out.score, bc.length_penalty);
            write_trace(t.file, a, &trace)?;
            out
        }
        None => engine.beam_search(prompt, index, &bc)?,
    };
    if !out.accepted {
        bail!(
            "the output is incomplete after {} tokens: {:?}",
            out.tokens.len(),
            out.text()
        );
    }
    let stdout = std::io::stdout();
    let mut sink = stdout.lock();
    sink.write_all(&out.bytes)?;
    sink.write_all(b"\n")?;
    sink.flush()?;
    let s = &out.stats;
    eprintln!(
        "beam {beams}: {} tokens, log p {:.4}, score {:.4} (greedy's {:.4}{}), {} model calls, {:.2} s",
        out.tokens.len(),
        out.logprob,
        out.score,
        out.greedy.score,
        if out.from_greedy { ", kept" } else { "" },
        s.model_calls,
        (s.prefill_time + s.decode_time).as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// The settings a trace records: what shaped the distribution and the budget.
fn settings_json(a: &GenerateArgs, c: &GenerateConfig) -> serde_json::Value {
    let s = &c.sampling;
    let constraint = if let Some(p) = &a.schema {
        serde_json::json!({"schema": p.display().to_string()})
    } else if let Some(p) = &a.tools {
        serde_json::json!({"tools": p.display().to_string()})
    } else if let Some(re) = &a.regex {
        serde_json::json!({"regex": re})
    } else if let Some(p) = &a.grammar {
        serde_json::json!({"grammar": p.display().to_string()})
    } else if let Some(p) = &a.structural_tag {
        serde_json::json!({"structural_tag": p.display().to_string()})
    } else {
        serde_json::Value::Null
    };
    // The strategy, where not plain decoding: whose distribution the steps
    // show (the target's under a draft, the guided one under guidance).
    let mut strategy = serde_json::Map::new();
    if let Some(n) = a.beam {
        strategy.insert("beam".into(), n.into());
        strategy.insert(
            "length_penalty".into(),
            serde_json::json!(a.length_penalty.unwrap_or(1.0)),
        );
    }
    if let Some(p) = &a.draft_model {
        strategy.insert("draft_model".into(), p.display().to_string().into());
        strategy.insert(
            "draft_tokens".into(),
            a.draft_tokens.unwrap_or(DEFAULT_DRAFT_TOKENS).into(),
        );
        strategy.insert("draft_fixed".into(), a.draft_fixed.into());
        strategy.insert("logits".into(), "target".into());
    }
    if let Some(g) = a.guidance_scale {
        strategy.insert("guidance_scale".into(), serde_json::json!(g));
        strategy.insert(
            "negative_prompt".into(),
            a.negative_prompt.clone().unwrap_or_default().into(),
        );
        strategy.insert("logits".into(), "guided".into());
    }
    if let Some(p) = &a.contrastive_model {
        strategy.insert("contrastive_model".into(), p.display().to_string().into());
        strategy.insert(
            "contrastive_alpha".into(),
            serde_json::json!(a.contrastive_alpha.unwrap_or(DEFAULT_CONTRASTIVE_ALPHA)),
        );
        strategy.insert("logits".into(), "guided".into());
    }
    let mut v = serde_json::json!({
        "constraint": constraint,
        "max_tokens": c.max_tokens,
        "greedy": s.is_greedy(),
        "temperature": s.temperature,
        "top_k": s.top_k,
        "top_p": s.top_p,
        "min_p": s.min_p,
        "repetition_penalty": s.repetition_penalty,
        "frequency_penalty": s.frequency_penalty,
        "presence_penalty": s.presence_penalty,
        "penalty_last_n": s.penalty_last_n,
        "logit_bias": s.logit_bias.iter().map(|(t, v)| serde_json::json!([t.0, v])).collect::<Vec<_>>(),
        "seed": c.seed,
        "jump_forward": c.jump_forward,
        "raw": a.raw,
    });
    if let Some(m) = v.as_object_mut() {
        m.extend(strategy);
    }
    v
}
