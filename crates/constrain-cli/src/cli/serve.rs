//! `constrain serve`: the OpenAI-compatible server of `constrain-server`,
//! over the default model in `$CONSTRAIN_HOME` unless `--model` says
//! otherwise. Startup problems (a missing model, a port in use) are one
//! `error:` line and exit 2.

use super::common::constrain_home;
use super::generate::DEFAULT_MODEL;
use anyhow::Context;
use constrain_model::{self as model, TokenizerSource};
use constrain_server::{ServerConfig, ServerState};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on.
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// GGUF model (default: $CONSTRAIN_HOME/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf).
    #[arg(long, value_name = "FILE")]
    model: Option<PathBuf>,
    /// tokenizer.json (default: the tokenizer stored in the GGUF file).
    #[arg(long, value_name = "FILE")]
    tokenizer: Option<PathBuf>,
    /// CPU threads for the model (default: physical cores).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Sequences decoded at once (each holds its own model instance and KV cache).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    parallel: u16,
    /// Prompt tokens one forward pass feeds at most, besides one token per
    /// decoding sequence: a longer prompt is fed in chunks over several
    /// passes while the other sequences keep decoding (0: no limit).
    #[arg(long, value_name = "N", default_value_t = constrain_server::batch::DEFAULT_PREFILL_CHUNK)]
    prefill_chunk: usize,
    /// MiB of KV cache kept for prompt prefixes shared between requests
    /// (chat template, system prompt, tools), least recently used evicted
    /// first (0: off).
    #[arg(long, value_name = "MIB", default_value_t = constrain_server::batch::DEFAULT_PREFIX_CACHE_BYTES >> 20)]
    prefix_cache_mb: usize,
    /// Require `Authorization: Bearer KEY` on /v1/* requests (compared
    /// byte for byte, in constant time).
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// Seconds a request's head may take to arrive, and then its body;
    /// past it, 408 and the connection is closed.
    #[arg(long, value_name = "S", default_value_t = constrain_server::DEFAULT_READ_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    read_timeout_s: u64,
    /// Connections open at once; past it, a new one is answered 503 with
    /// Retry-After.
    #[arg(long, value_name = "N", default_value_t = constrain_server::DEFAULT_MAX_CONNECTIONS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_connections: usize,
    /// Constraint compiles run at once (the others wait for a turn).
    #[arg(long, value_name = "N", default_value_t = constrain_server::compile::DEFAULT_COMPILE_THREADS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256))]
    compile_threads: usize,
    /// Milliseconds one compile may run; past it the request is a 400 that
    /// names this limit.
    #[arg(long, value_name = "MS", default_value_t = constrain_server::compile::DEFAULT_COMPILE_TIMEOUT.as_millis() as u64, value_parser = clap::value_parser!(u64).range(1..))]
    compile_timeout_ms: u64,
    /// MiB each large structure of one compile (NFA, determinizer, DFA
    /// table, token masks) may take; past it, a 400 that names this limit.
    #[arg(long, value_name = "MIB", default_value_t = constrain_server::compile::DEFAULT_COMPILE_MEMORY >> 20, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    compile_memory_mb: usize,
    /// MiB of compiled constraints kept for later requests (only those that
    /// served a request; least recently used out first; 0: none kept).
    #[arg(long, value_name = "MIB", default_value_t = constrain_server::compile::DEFAULT_CACHE_BYTES >> 20)]
    cache_mb: usize,
    /// Tool calls as one structural tag in this format (`qwen_3`, `llama`,
    /// `mistral`, `qwen_3_coder`): free text and calls in one automaton,
    /// calls read back by the format's parser. Default: Qwen's
    /// `<tool_call>` format with a lazy trigger.
    #[arg(long, value_name = "NAME", value_parser = parse_tool_format)]
    tool_format: Option<constrain::tools::ToolFormat>,
    /// A reasoning model: an answer may open with a `<think>...</think>`
    /// block, free of any constraint, returned as `reasoning_content`.
    #[arg(long)]
    reasoning: bool,
    /// Compute each step's mask after the batched pass instead of during
    /// it (the output is the same; for measuring what the overlap saves).
    #[arg(long)]
    no_mask_overlap: bool,
    /// Sample every token, even the text a constraint forces (by default
    /// that text is fed in multi-token passes: jump-forward)
    #[arg(long)]
    no_jump_forward: bool,
}

fn parse_tool_format(s: &str) -> Result<constrain::tools::ToolFormat, String> {
    constrain::tools::ToolFormat::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = constrain::tools::ToolFormat::ALL
            .iter()
            .map(|f| f.name())
            .collect();
        format!(
            "unknown tool format {s:?}; expected one of {}",
            names.join(", ")
        )
    })
}

/// mimalloc (the binary's allocator) returns the calling thread's free
/// pages to the system.
fn mimalloc_collect() {
    // SAFETY: mi_collect takes no pointer; it walks mimalloc's own heap of
    // the calling thread, and may be called from any thread at any time.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

pub fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(n) = a.threads {
        model::set_threads(n)?;
    }
    let model_path = a
        .model
        .clone()
        .unwrap_or_else(|| constrain_home().join(DEFAULT_MODEL));
    let tok_src = match &a.tokenizer {
        Some(p) => TokenizerSource::Json(p.clone()),
        None => TokenizerSource::Gguf,
    };
    eprintln!("loading model {} ...", model_path.display());
    let (tokenizer, vocab, factory) = constrain_server::load_qwen_with(
        &model_path,
        &tok_src,
        constrain_server::batch::BatchConfig::default()
            .prefill_chunk(a.prefill_chunk)
            .prefix_cache_bytes(a.prefix_cache_mb.saturating_mul(1 << 20)),
    )?;
    let name = model_path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "constrain".into());
    let config = ServerConfig::default()
        .parallel(a.parallel as usize)
        .api_key(a.api_key.clone())
        .read_timeout(std::time::Duration::from_secs(a.read_timeout_s))
        .max_connections(a.max_connections)
        .compile(
            constrain_server::compile::CompileLimits::default()
                .threads(a.compile_threads)
                .timeout(std::time::Duration::from_millis(a.compile_timeout_ms))
                .memory_bytes(a.compile_memory_mb.saturating_mul(1 << 20))
                .cache_bytes(a.cache_mb.saturating_mul(1 << 20)),
        )
        .release_memory(mimalloc_collect)
        .tool_format(a.tool_format)
        .reasoning(a.reasoning)
        .mask_overlap(!a.no_mask_overlap)
        .jump_forward(!a.no_jump_forward);
    let state = ServerState::new(config, name, tokenizer, vocab, factory)?;
    let addr = format!("{}:{}", a.host, a.port);
    constrain_server::run_blocking(state, &addr, |bound| {
        eprintln!(
            "constrain serve: listening on http://{bound} (OpenAI API at http://{bound}/v1, {} slot(s){})",
            a.parallel,
            if a.api_key.is_some() { ", API key required" } else { "" }
        );
    })
    .with_context(|| format!("cannot serve on {addr}"))?;
    Ok(ExitCode::SUCCESS)
}
