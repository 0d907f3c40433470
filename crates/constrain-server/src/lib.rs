//! # constrain-server: an OpenAI-compatible chat completions server
//!
//! `constrain serve` in a library, so that tests start it on an ephemeral
//! loopback port with a fake or tiny model. The HTTP stack is tokio + axum.
//!
//! ## Routes
//!
//! * `POST /v1/chat/completions`: the OpenAI request (`messages`,
//!   `response_format`, `tools` / `tool_choice`, `stream`, sampling knobs),
//!   answered as `chat.completion` JSON or as server-sent
//!   `chat.completion.chunk` events ending in `data: [DONE]`;
//! * `GET /v1/models`: the one model served;
//! * `GET /health`: liveness, slots in use, queue length;
//! * `GET /`: a self-contained playground page (prompt, schema or tools
//!   editor with examples, sampling controls, the answer streaming in).
//!
//! ## A request's path
//!
//! 1. **Read and check** ([`api`]): the body (413 past
//!    [`ServerConfig::max_body_bytes`]), its JSON (400 with line and column),
//!    every field the server uses (400 naming the field as `param`); the
//!    bearer token when the server has an API key (401).
//! 2. **Plan** ([`chat`]): render the conversation with Qwen's chat template
//!    and choose the constraint (a JSON Schema, any object, tool calls,
//!    text that is not a tool call...).
//!    The prompt is tokenized and counted here, before any compile: a
//!    prompt over the context (or `max_tokens` past the context left) is a
//!    400 that costs no compile.
//! 3. **Compile** in the bounded compile pool ([`compile`]): one flight per
//!    source, under a time and a memory budget, abandoned when its clients
//!    leave, never on a decode thread; only artefacts that served a request
//!    are cached. A schema that does not compile is a 400 whose message
//!    names the keyword and JSON Pointer (or the budget it passed). The
//!    budget is checked here too: `max_tokens` below what the constraint
//!    needs to finish is a 400 that says the minimum (budget-safe
//!    completion, see `constrain_model::generate`).
//! 4. **Admit** ([`scheduler`]): wait for one of `--parallel` slots in a
//!    bounded queue (503 + `Retry-After` past it).
//! 5. **Decode** ([`run`]): the generation loop of `constrain-model`, over
//!    the slot's own sequence; bytes stream out as they are taken. With the
//!    Qwen model the sequences share one copy of the weights and one decode
//!    loop that runs one batched forward pass per step over all of them
//!    ([`batch`]), a long prompt fed in chunks so that the others keep
//!    stepping, and a prompt that shares its start with an earlier one
//!    (chat template, system prompt, tools) starting from a copy of that
//!    one's KV cache ([`prefix`]). A client that goes away cancels its sequence before the
//!    next forward pass.
//!
//! ## Errors
//!
//! Every failure is an [`ApiError`], answered in OpenAI's shape
//! `{"error": {"message", "type", "param", "code"}}`. Handlers return
//! `Result`; nothing in a request's path panics on client input, and one
//! request's failure touches no other (each has its own matcher, sampler and
//! model instance).

#![deny(missing_docs)]
pub mod api;
pub mod batch;
pub mod calls;
pub mod chat;
pub mod compile;
pub mod conn;
pub mod custom;
pub mod error;
pub mod prefix;
pub mod run;
pub mod scheduler;
mod server;

pub use error::ApiError;
pub use scheduler::{ModelFactory, Scheduler, SeqModel};
pub use server::router;

use compile::{CompileLimits, CompilePool};
use constrain::vocab::{TextTokenizer, Vocabulary};
use constrain::CompilerConfig;
use constrain_model::ModelError;
use std::sync::Arc;

/// Default of [`ServerConfig::read_timeout`] (`--read-timeout-s`).
pub const DEFAULT_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Default of [`ServerConfig::max_connections`] (`--max-connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Server settings (the CLI flags and limits).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Sequences decoded at once (`--parallel`, default 1).
    pub parallel: usize,
    /// Requests that may wait for a slot; past it, 503 (default 64).
    pub max_queue: usize,
    /// Bearer token required on `/v1/*` (`--api-key`; default none).
    pub api_key: Option<String>,
    /// Largest request body (default 8 MiB); past it, 413.
    pub max_body_bytes: usize,
    /// `max_tokens` when a request gives none (default 1024; raised to what
    /// a constraint needs, lowered to the context left).
    pub default_max_tokens: usize,
    /// Largest `n` (default 8).
    pub max_n: usize,
    /// Time a request's head may take to arrive, and (counted from its
    /// end) its body (`--read-timeout-s`, default 30 s); past it, 408.
    pub read_timeout: std::time::Duration,
    /// Connections open at once (`--max-connections`, default 256); past
    /// it, a new connection is answered 503 with `Retry-After`.
    pub max_connections: usize,
    /// The core compiler's settings (its memory limits capped by
    /// `compile.memory_bytes`; its own cache unused).
    pub compiler: CompilerConfig,
    /// The compile pool's limits: threads, time and memory budgets, cache
    /// bytes (`--compile-threads`, `--compile-timeout-ms`,
    /// `--compile-memory-mb`, `--cache-mb`).
    pub compile: CompileLimits,
    /// Returns freed heap memory to the system, called on a compile's
    /// thread after a big compile (default: glibc's `malloc_trim`,
    /// [`compile::release_memory`]; a binary with another global allocator
    /// passes that allocator's purge).
    pub release_memory: fn(),
    /// The tool-call format (`--tool-format`): when set, a tools request is
    /// compiled as that format's structural tag (free text and calls in one
    /// automaton, [`constrain::tools::structural_tag`]) and its calls are
    /// read back by [`calls::parse_calls`]. `None`: Qwen's `<tool_call>`
    /// format through the trigger path of [`chat`].
    pub tool_format: Option<constrain::tools::ToolFormat>,
    /// A reasoning model (`--reasoning`): an answer may begin with a
    /// `<think>…</think>` block, unconstrained but for its closing marker,
    /// returned as `message.reasoning_content` (streamed as
    /// `delta.reasoning_content`); constraints apply after it.
    pub reasoning: bool,
    /// Compute each decoding step's mask while the batched pass for the
    /// previous token runs (default `true`; `--no-mask-overlap` turns it
    /// off, for measurement: the output is the same either way). See
    /// [`constrain_model::generate::GenerateConfig::mask_overlap`].
    pub mask_overlap: bool,
    /// Feed the text a constraint forces (a JSON key, its punctuation) in
    /// multi-token passes instead of sampling it token by token (default
    /// `true`; `--no-jump-forward` turns it off, so that every token of an
    /// answer is a sampled one, as in an engine without jump-forward).
    /// Requests with `logprobs` or `constrain_trace` never jump forward.
    pub jump_forward: bool,
}

constrain::config_setters!(ServerConfig {
    parallel: usize,
    max_queue: usize,
    api_key: Option<String>,
    max_body_bytes: usize,
    default_max_tokens: usize,
    max_n: usize,
    read_timeout: std::time::Duration,
    max_connections: usize,
    compiler: CompilerConfig,
    compile: CompileLimits,
    release_memory: fn(),
    tool_format: Option<constrain::tools::ToolFormat>,
    reasoning: bool,
    mask_overlap: bool,
    jump_forward: bool,
});

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            parallel: 1,
            max_queue: 64,
            api_key: None,
            max_body_bytes: 8 << 20,
            default_max_tokens: 1024,
            max_n: 8,
            read_timeout: DEFAULT_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            compiler: CompilerConfig::default(),
            compile: CompileLimits::default(),
            release_memory: compile::release_memory,
            tool_format: None,
            reasoning: false,
            mask_overlap: true,
            jump_forward: true,
        }
    }
}

/// Everything the handlers share.
pub struct ServerState {
    /// The server's settings.
    pub config: ServerConfig,
    /// The id the server answers with (`model` in responses, `/v1/models`).
    pub model_name: String,
    /// Turns the rendered prompt into tokens.
    pub tokenizer: TextTokenizer,
    /// The model's vocabulary, widened to its logits width.
    pub vocab: Arc<Vocabulary>,
    /// The compile pool and its cache of artefacts that served.
    pub compiles: Arc<CompilePool>,
    /// Hands out the model slots that decode requests.
    pub scheduler: Arc<Scheduler>,
    /// The model's context length in tokens.
    pub context_length: usize,
    /// Unix time the server started.
    pub started: u64,
}

impl ServerState {
    /// Builds the state: makes one model instance through `factory` (to
    /// learn the logits width and context, and to check the vocabulary
    /// against it); the other slots get theirs on first use.
    pub fn new(
        config: ServerConfig,
        model_name: impl Into<String>,
        tokenizer: TextTokenizer,
        vocab: Arc<Vocabulary>,
        factory: ModelFactory,
    ) -> Result<Arc<ServerState>, ModelError> {
        let first = factory()?;
        let width = first.logits_width();
        let vocab = if vocab.logits_width() == width {
            vocab
        } else {
            Arc::new(constrain_model::check_compatible((*vocab).clone(), width)?)
        };
        let context_length = first.context_length();
        Ok(Arc::new(ServerState {
            compiles: Arc::new(CompilePool::new(
                vocab.clone(),
                &config.compiler,
                config.compile.clone(),
                config.release_memory,
            )),
            scheduler: Arc::new(Scheduler::new(
                config.parallel,
                config.max_queue,
                factory,
                Some(first),
            )),
            config,
            model_name: model_name.into(),
            tokenizer,
            vocab,
            context_length,
            started: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }))
    }
}

/// Loads a GGUF model for serving: the tokenizer and vocabulary, **one**
/// copy of the weights, and the decode loop ([`batch`]) that runs one
/// batched forward pass per step over the active sequences. The factory
/// makes a sequence handle (its own KV cache, the weights shared) per slot.
pub fn load_qwen(
    path: &std::path::Path,
    tokenizer: &constrain_model::TokenizerSource,
) -> Result<(TextTokenizer, Arc<Vocabulary>, ModelFactory), ModelError> {
    load_qwen_with(path, tokenizer, batch::BatchConfig::default())
}

/// [`load_qwen`] with the decode loop's settings (per-pass prefill budget,
/// prompt-prefix cache size).
pub fn load_qwen_with(
    path: &std::path::Path,
    tokenizer: &constrain_model::TokenizerSource,
    config: batch::BatchConfig,
) -> Result<(TextTokenizer, Arc<Vocabulary>, ModelFactory), ModelError> {
    let loaded = constrain_model::load(path, tokenizer)?;
    let batcher =
        batch::Batcher::start_with(batch::QwenBatch(loaded.model.weights().clone()), config);
    let factory: ModelFactory = Arc::new(move || Ok(Box::new(batcher.handle()?) as SeqModel));
    Ok((loaded.tokenizer, loaded.vocab, factory))
}

/// Serves `state` on `listener` until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<ServerState>,
) -> std::io::Result<()> {
    let limits = conn::Limits {
        max_connections: state.config.max_connections,
        read_timeout: state.config.read_timeout,
    };
    conn::serve(listener, router(state), limits).await
}

/// Starts a server on a background thread with its own tokio runtime, on
/// `addr` (`127.0.0.1:0` for an ephemeral port); returns the bound address.
/// For tests and benches.
pub fn spawn(state: Arc<ServerState>, addr: &str) -> std::io::Result<std::net::SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    std::thread::spawn(move || {
        rt.block_on(async move {
            if let Ok(l) = tokio::net::TcpListener::from_std(listener) {
                let _ = serve(l, state).await;
            }
        })
    });
    Ok(local)
}

/// Binds `addr` and serves `state` on the calling thread until the process
/// ends (the CLI's `constrain serve`); `on_bound` hears the bound address.
pub fn run_blocking(
    state: Arc<ServerState>,
    addr: &str,
    on_bound: impl FnOnce(std::net::SocketAddr),
) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        on_bound(listener.local_addr()?);
        serve(listener, state).await
    })
}
