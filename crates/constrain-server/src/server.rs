//! The HTTP routes: `POST /v1/chat/completions`, `GET /v1/models`,
//! `GET /health`, and the JSON / SSE answers.

use crate::api::{parse_request, ChatRequest};
use crate::chat::{plan, Plan};
use crate::error::ApiError;
use crate::run::{
    content_markers, map_generate_error, run_job, safe_prefix, ChoiceOut, Job, NoSink, Sink,
};
use crate::scheduler::CancelOnDrop;
use crate::ServerState;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use constrain::sampling::SamplingConfig;
use constrain::TokenId;
use constrain_model::generate::GenerateConfig;
use serde_json::{json, Value};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The router over a server state.
pub fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/", get(playground))
        .fallback(|| async { ApiError::not_found("no such route; the server answers POST /v1/chat/completions, GET /v1/models, GET /health and GET / (playground)") })
        .with_state(state)
}

/// The playground page: self-contained HTML (no external scripts or
/// styles), with the step inspector's style and script (the component
/// `constrain view` pages carry, [`constrain_model::inspector`]) put in
/// place of its two placeholders.
const PLAYGROUND: &str = include_str!("playground.html");

/// [`PLAYGROUND`] with the inspector's style and script in place.
fn playground_html() -> &'static str {
    static PAGE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PAGE.get_or_init(|| {
        PLAYGROUND
            .replacen(
                "/*CONSTRAIN_INSPECTOR_STYLE*/",
                constrain_model::inspector::STYLE,
                1,
            )
            .replacen(
                "/*CONSTRAIN_INSPECTOR_SCRIPT*/",
                constrain_model::inspector::SCRIPT,
                1,
            )
    })
}

async fn playground() -> axum::response::Html<&'static str> {
    axum::response::Html(playground_html())
}

fn check_auth(state: &ServerState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(key) = &state.config.api_key else {
        return Ok(());
    };
    let got = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match got {
        None => Err(ApiError::unauthorized(
            "missing API key: send the header Authorization: Bearer <key>",
        )),
        Some(k) if same_key(k.as_bytes(), key.as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::unauthorized("incorrect API key")),
    }
}

/// Whether `got` is `key`, byte for byte (no trimming), in a time that
/// depends on the lengths only: every byte of the longer is compared, and
/// nothing returns at the first difference.
fn same_key(got: &[u8], key: &[u8]) -> bool {
    let n = got.len().max(key.len());
    let mut diff = got.len() ^ key.len();
    for i in 0..n {
        let a = got.get(i).copied().unwrap_or(0);
        let b = key.get(i).copied().unwrap_or(0);
        diff |= std::hint::black_box(usize::from(a ^ b));
    }
    std::hint::black_box(diff) == 0
}

/// Reads a request body: 413 past `limit` bytes, 400 when HTTP's framing of
/// it breaks (a bad chunk size, a body shorter than its `Content-Length`),
/// 408 when it has not arrived in full within `timeout`.
async fn read_body(
    body: axum::body::Body,
    limit: usize,
    timeout: std::time::Duration,
) -> Result<axum::body::Bytes, ApiError> {
    use futures_util::StreamExt;
    let read = async {
        let mut stream = body.into_data_stream();
        let mut out = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(ApiError::malformed_body)?;
            if out.len() + chunk.len() > limit {
                return Err(ApiError::too_large(limit));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(axum::body::Bytes::from(out))
    };
    tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| ApiError::body_timeout(timeout))?
}

async fn health(State(state): State<Arc<ServerState>>) -> Json<Value> {
    let cached = state.compiles.cached();
    Json(json!({
        "status": "ok",
        "model": state.model_name,
        "slots": state.scheduler.parallel(),
        "active": state.scheduler.active(),
        "waiting": state.scheduler.waiting(),
        "compiling": state.compiles.running(),
        "compiles_waiting": state.compiles.waiting(),
        "compiles_total": state.compiles.started(),
        "compile_cache": {"entries": cached.0, "bytes": cached.1},
    }))
}

async fn models(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    check_auth(&state, &headers)?;
    Ok(Json(json!({
        "object": "list",
        "data": [{
            "id": state.model_name,
            "object": "model",
            "created": state.started,
            "owned_by": "constrain",
            "max_model_len": state.context_length,
        }],
    })))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn random_id(prefix: &str) -> String {
    format!(
        "{prefix}{:016x}{:08x}",
        rand::random::<u64>(),
        rand::random::<u32>()
    )
}

/// A body at least this big returns the memory its parse and prompt
/// tokenization freed to the system once checked.
const BIG_BODY: usize = 256 << 10;

/// A checked request, ready to run.
struct Prepared {
    job: Job,
    /// Its compiled constraints, kept in the cache once they have served.
    keep: Vec<(crate::compile::Key, Arc<constrain::Compiled>)>,
    stream: bool,
    include_usage: bool,
    prompt_tokens: usize,
}

async fn chat_completions(State(state): State<Arc<ServerState>>, req: Request) -> Response {
    match handle(state, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn handle(state: Arc<ServerState>, req: Request) -> Result<Response, ApiError> {
    check_auth(&state, req.headers())?;
    let limit = state.config.max_body_bytes;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::too_large(limit));
    }
    let body = read_body(req.into_body(), limit, state.config.read_timeout).await?;
    let cancel = Arc::new(AtomicBool::new(false));
    let guard = CancelOnDrop(cancel.clone());
    // The cheap checks first (parse, render and count the prompt off the
    // async threads), then the compile in the pool, then the checks that
    // need it.
    let st = state.clone();
    let c = cancel.clone();
    let mut checked = tokio::task::spawn_blocking(move || {
        let big = body.len() >= BIG_BODY;
        let checked = parse_request(&body).and_then(|r| check(&st, r, c));
        drop(body);
        if big {
            // Parsing and tokenizing a big body leaves its scratch free
            // on this thread: give it back to the system.
            (st.config.release_memory)();
        }
        checked
    })
    .await
    .map_err(|e| ApiError::internal(format!("request preparation failed: {e}")))??;
    let param = checked.plan.source_param;
    let source = checked.plan.source.take();
    let trigger = checked.plan.trigger.take();
    let compiled = compile(&state, source, param).await?;
    let trigger = compile(&state, trigger, param).await?;
    let mut prepared = finish(
        &state,
        checked,
        compiled.as_ref().map(|(_, c)| c.clone()),
        trigger.as_ref().map(|(_, c)| c.clone()),
    )?;
    prepared.keep = compiled.into_iter().chain(trigger).collect();
    let slot = state.scheduler.acquire().await?;
    if prepared.stream {
        Ok(stream_response(state, prepared, slot, guard))
    } else {
        let st = state.clone();
        let job = prepared.job;
        let (choices, job) = tokio::task::spawn_blocking(move || {
            run_job(slot, &job, &st.vocab, &st.tokenizer, &mut NoSink).map(|c| (c, job))
        })
        .await
        .map_err(|e| ApiError::internal(format!("the generation worker failed: {e}")))??;
        drop(guard);
        keep(&state, &prepared.keep);
        let mut body = completion_body(&state, &choices, prepared.prompt_tokens);
        for (i, c) in choices.iter().enumerate() {
            if let Some(t) = trace_json(&state, &job, c) {
                body["choices"][i]["constrain_trace"] = t;
            }
        }
        Ok(Json(body).into_response())
    }
}

/// A request whose cheap checks have passed: every parameter valid, the
/// prompt rendered, tokenized and within the context. Its constraint is
/// not compiled yet.
struct Checked {
    req: ChatRequest,
    n: usize,
    sampling: SamplingConfig,
    logprobs: Option<usize>,
    plan: Plan,
    prompt: Vec<TokenId>,
    cancel: Arc<AtomicBool>,
}

/// The cheap checks, in order: every parameter, then the prompt rendered
/// and its tokens counted (and `max_tokens` against the context left).
/// Nothing here compiles a constraint, so a request that fails them costs
/// no compile.
fn check(
    state: &ServerState,
    req: ChatRequest,
    cancel: Arc<AtomicBool>,
) -> Result<Checked, ApiError> {
    let n = req.n.unwrap_or(1);
    if n < 1 || n as usize > state.config.max_n {
        return Err(ApiError::field(
            "n",
            format!("n must be between 1 and {}", state.config.max_n),
        ));
    }
    let temperature = req.temperature.unwrap_or(1.0);
    if !(0.0..=2.0).contains(&temperature) {
        return Err(ApiError::field(
            "temperature",
            "temperature must be between 0 and 2",
        ));
    }
    let top_p = req.top_p.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(ApiError::field("top_p", "top_p must be in (0, 1]"));
    }
    for (name, v) in [
        ("frequency_penalty", req.frequency_penalty),
        ("presence_penalty", req.presence_penalty),
    ] {
        if v.is_some_and(|v| !(-2.0..=2.0).contains(&v)) {
            return Err(ApiError::field(
                name,
                format!("{name} must be between -2 and 2"),
            ));
        }
    }
    let logprobs = match (req.logprobs.unwrap_or(false), req.top_logprobs) {
        (_, Some(k)) if !(0..=20).contains(&k) => {
            return Err(ApiError::field(
                "top_logprobs",
                "top_logprobs must be between 0 and 20",
            ))
        }
        (false, Some(_)) => {
            return Err(ApiError::field(
                "top_logprobs",
                "top_logprobs needs logprobs: true",
            ))
        }
        (true, k) => Some(k.unwrap_or(0) as usize),
        (false, None) => None,
    };
    let width = state.vocab.logits_width();
    let mut logit_bias = Vec::new();
    for (k, &b) in req.logit_bias.iter().flatten() {
        let id: usize = k
            .parse()
            .ok()
            .filter(|&i: &usize| i < width)
            .ok_or_else(|| {
                ApiError::field(
                    "logit_bias",
                    format!("logit_bias key {k:?} is not a token id below {width}"),
                )
            })?;
        if !(-100.0..=100.0).contains(&b) {
            return Err(ApiError::field(
                "logit_bias",
                format!("logit_bias value {b} for token {k} is outside [-100, 100]"),
            ));
        }
        logit_bias.push((TokenId(id as u32), b));
    }
    let sampling = SamplingConfig::default()
        .temperature(temperature)
        .top_p(top_p)
        .frequency_penalty(req.frequency_penalty.unwrap_or(0.0))
        .presence_penalty(req.presence_penalty.unwrap_or(0.0))
        .logit_bias(logit_bias);
    sampling
        .validate()
        .map_err(|e| ApiError::bad(None, format!("invalid sampling parameters: {e}")))?;
    let (param, asked) = budget_param(&req);
    if asked.is_some_and(|m| m < 1) {
        return Err(ApiError::field(
            param,
            format!("{param} must be at least 1"),
        ));
    }

    let plan = plan(&req, state.config.tool_format, state.config.reasoning)?;
    let prompt = encode_prompt(state, &plan.prompt)?;
    let context = state.context_length;
    if prompt.len() >= context {
        return Err(ApiError::field(
            "messages",
            format!(
                "the prompt has {} tokens but the model's context is {context} tokens",
                prompt.len()
            ),
        )
        .with_code("context_length_exceeded"));
    }
    let room = context - prompt.len();
    if let Some(m) = asked.map(|m| m as usize).filter(|&m| m > room) {
        return Err(too_long(param, prompt.len(), m, context, room));
    }
    Ok(Checked {
        req,
        n: n as usize,
        sampling,
        logprobs,
        plan,
        prompt,
        cancel,
    })
}

/// A prompt this many times the context (in bytes) or longer is first
/// counted on its head of that many bytes ([`encode_prompt`]).
const HEAD_BYTES_PER_TOKEN: usize = 8;
/// Tokens the head's cut can add to its count: the head's last word may
/// tokenize differently than in the whole text, and the cut is made with a
/// word boundary at most this many bytes before it.
const CUT_SLACK: usize = 256;

/// Tokenizes the prompt, or refuses it (`context_length_exceeded`) from
/// its head alone: a prompt far longer than the context is first counted
/// on its first `HEAD_BYTES_PER_TOKEN` × context bytes, and when those
/// alone are over the context (by more than the cut can add), the rest is
/// never tokenized, so a multi-megabyte prompt is refused in milliseconds
/// and without the memory of its tokenization. The cut is made after a
/// word boundary (ASCII space or punctuation: byte-level BPE pre-tokenizers
/// split there), so only the head's last word can count differently.
fn encode_prompt(state: &ServerState, text: &str) -> Result<Vec<TokenId>, ApiError> {
    let context = state.context_length;
    let encode = |t: &str| {
        state
            .tokenizer
            .encode(t)
            .map_err(|e| ApiError::internal(format!("tokenizing the prompt failed: {e}")))
    };
    let head = context.saturating_mul(HEAD_BYTES_PER_TOKEN);
    if text.len() > head {
        let bytes = text.as_bytes();
        let cut = (head.saturating_sub(CUT_SLACK).max(1)..=head)
            .rev()
            .find(|&i| {
                text.is_char_boundary(i)
                    && (bytes[i - 1].is_ascii_whitespace() || bytes[i - 1].is_ascii_punctuation())
            });
        if let Some(cut) = cut {
            let n = encode(&text[..cut])?.len();
            if n >= context + CUT_SLACK {
                return Err(ApiError::field(
                    "messages",
                    format!(
                        "the prompt has more than {} tokens (its first {cut} of {} bytes alone are {n} tokens) but the model's context is {context} tokens",
                        n - CUT_SLACK,
                        text.len()
                    ),
                )
                .with_code("context_length_exceeded"));
            }
        }
    }
    encode(text)
}

/// The budget's field (`max_completion_tokens` over `max_tokens`) and value.
fn budget_param(req: &ChatRequest) -> (&'static str, Option<i64>) {
    match (req.max_completion_tokens, req.max_tokens) {
        (Some(m), _) => ("max_completion_tokens", Some(m)),
        (None, m) => ("max_tokens", m),
    }
}

fn too_long(
    param: &str,
    prompt: usize,
    max_tokens: usize,
    context: usize,
    room: usize,
) -> ApiError {
    ApiError::field(
        param,
        format!(
            "the prompt ({prompt} tokens) + {param} ({max_tokens}) exceeds the model's context of {context} tokens; lower {param} to at most {room}"
        ),
    )
    .with_code("context_length_exceeded")
}

/// Compiles a checked request's constraint (and its trigger) in the pool.
/// Dropped with the request (its client gone), it leaves the compile,
/// which is abandoned when no other request waits for it.
async fn compile(
    state: &ServerState,
    source: Option<constrain::Source>,
    param: &'static str,
) -> Result<Option<(crate::compile::Key, Arc<constrain::Compiled>)>, ApiError> {
    use crate::compile::CompileFailure;
    let Some(source) = source else {
        return Ok(None);
    };
    let (key, outcome) = state.compiles.compile(source).await;
    let limits = state.compiles.limits();
    match outcome {
        Ok(c) => Ok(Some((key, c))),
        Err(CompileFailure::Error(e)) => Err(ApiError::field(
            param,
            format!("the constraint does not compile: {e}"),
        )),
        Err(CompileFailure::Memory(e)) => Err(ApiError::field(
            param,
            format!(
                "the constraint does not compile within the server's compile memory budget of {} MiB (--compile-memory-mb): {e}",
                limits.memory_bytes >> 20
            ),
        )
        .with_code("compile_memory_exceeded")),
        Err(CompileFailure::Timeout(t)) => Err(ApiError::field(
            param,
            format!(
                "the constraint did not compile within the server's compile time budget of {} ms (--compile-timeout-ms)",
                t.as_millis()
            ),
        )
        .with_code("compile_timeout")),
        Err(CompileFailure::Internal(e)) => Err(ApiError::internal(e)),
    }
}

/// The checks that need the compiled constraint (the budget it needs), and
/// the job.
fn finish(
    state: &ServerState,
    checked: Checked,
    compiled: Option<Arc<constrain::Compiled>>,
    trigger: Option<Arc<constrain::Compiled>>,
) -> Result<Prepared, ApiError> {
    let Checked {
        req,
        n,
        sampling,
        logprobs,
        plan,
        prompt,
        cancel,
    } = checked;
    let Plan {
        prompt: prompt_text,
        tools_active,
        structured,
        stop,
        prefix,
        tool_format,
        bare_calls,
        tools,
        reasoning,
        ..
    } = plan;
    let context = state.context_length;
    let room = context - prompt.len();
    let needed = compiled
        .as_ref()
        .and_then(|c| c.matcher().tokens_to_accept())
        .unwrap_or(0) as usize;
    let (param, asked) = budget_param(&req);
    let max_tokens = match asked {
        Some(m) => m as usize,
        None => state
            .config
            .default_max_tokens
            .min(room)
            .max(needed.min(room)),
    };
    if max_tokens > room {
        return Err(too_long(param, prompt.len(), max_tokens, context, room));
    }
    if needed > max_tokens {
        let mut e = map_generate_error(constrain_model::generate::GenerateError::BudgetTooSmall {
            max_tokens,
            needed: needed as u32,
        });
        e.param = Some(param.into());
        e.message = e.message.replacen("max_tokens", param, 1);
        return Err(e);
    }
    let seed = match req.seed {
        Some(s) => s as u64,
        None => rand::random(),
    };
    let config = GenerateConfig::default()
        .max_tokens(max_tokens)
        .sampling(sampling)
        .seed(seed)
        .jump_forward(
            state.config.jump_forward
                && logprobs.is_none()
                && !req.constrain_trace.unwrap_or(false),
        )
        .mask_overlap(state.config.mask_overlap);
    Ok(Prepared {
        stream: req.stream.unwrap_or(false),
        include_usage: req
            .stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false),
        prompt_tokens: prompt.len(),
        keep: Vec::new(),
        job: Job {
            prompt_text,
            prompt,
            compiled,
            trigger,
            prefix,
            config,
            n,
            stop,
            tools_active,
            tool_format,
            bare_calls,
            tools,
            reasoning,
            structured,
            cancel,
            logprobs,
            trace: req.constrain_trace.unwrap_or(false),
        },
    })
}

/// Artefacts that served a request go into the compile cache.
fn keep(state: &ServerState, artefacts: &[(crate::compile::Key, Arc<constrain::Compiled>)]) {
    for (key, c) in artefacts {
        state.compiles.keep(*key, c);
    }
}

fn tool_calls_json(c: &ChoiceOut) -> Vec<Value> {
    c.calls
        .iter()
        .map(|call| {
            if c.custom {
                return crate::custom::call_json(random_id("call_"), call);
            }
            json!({
                "id": random_id("call_"),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            })
        })
        .collect()
}

fn logprobs_json(c: &ChoiceOut) -> Value {
    match &c.logprobs {
        Some(entries) => json!({"content": entries, "refusal": null}),
        None => Value::Null,
    }
}

/// A choice's `constrain_trace` (the extension): the same JSON as
/// `constrain --trace FILE` writes, so the playground draws it with the
/// inspector component `constrain view` uses.
fn trace_json(state: &ServerState, job: &Job, c: &ChoiceOut) -> Option<Value> {
    let steps = c.trace.clone()?;
    let s = &job.config;
    let settings = json!({
        "temperature": s.sampling.temperature,
        "top_p": s.sampling.top_p,
        "max_tokens": s.max_tokens,
        "seed": s.seed,
    });
    let t = constrain_model::trace::Trace::new(
        state.model_name.clone(),
        job.prompt_text.clone(),
        settings,
        steps,
    );
    serde_json::to_value(t).ok()
}

fn usage(prompt: usize, choices: &[ChoiceOut]) -> Value {
    let completion: usize = choices.iter().map(|c| c.completion_tokens).sum();
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

fn completion_body(state: &ServerState, choices: &[ChoiceOut], prompt_tokens: usize) -> Value {
    let cs: Vec<Value> = choices
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut message = json!({
                "role": "assistant",
                "content": if c.content.is_empty() && !c.calls.is_empty() { Value::Null } else { Value::String(c.content.clone()) },
                "refusal": null,
            });
            if let Some(r) = &c.reasoning {
                message["reasoning_content"] = json!(r);
            }
            if !c.calls.is_empty() {
                message["tool_calls"] = Value::Array(tool_calls_json(c));
            }
            json!({"index": i, "message": message, "logprobs": logprobs_json(c), "finish_reason": c.finish_reason})
        })
        .collect();
    json!({
        "id": random_id("chatcmpl-"),
        "object": "chat.completion",
        "created": now(),
        "model": state.model_name,
        "system_fingerprint": null,
        "choices": cs,
        "usage": usage(prompt_tokens, choices),
    })
}

/// Writes `chat.completion.chunk` events as a job runs.
struct SseWriter {
    tx: tokio::sync::mpsc::UnboundedSender<Event>,
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    markers: Vec<String>,
    /// Under `auto`: hold back an answer that may still open a bare call.
    bare: bool,
    /// Per choice: content bytes already sent, whether the role chunk went.
    sent: Vec<(usize, bool, bool)>,
    /// `--reasoning`: a leading `<think>` block streams as
    /// `delta.reasoning_content`, and content offsets count from its end.
    reasoning: bool,
    /// Per choice, with `reasoning`: how much of the thinking went.
    think: Vec<Think>,
}

/// A choice's streamed reasoning (see [`SseWriter::reasoning`]).
#[derive(Clone, Copy, Default)]
struct Think {
    /// Reasoning bytes sent (from the first non-blank byte after `<think>`).
    sent: usize,
}

/// Reads the thinking of `all` so far: `Err(())` while the output may
/// still open a block; else the block's text range (start, the end known so
/// far, without a partly arrived `</think>`) and where the content begins
/// once it has closed (`None` while it is open).
#[allow(clippy::result_unit_err)]
fn think_of(all: &[u8]) -> Result<(Option<(usize, usize)>, Option<usize>), ()> {
    let lead = all.iter().take_while(|b| b.is_ascii_whitespace()).count();
    let rest = &all[lead..];
    let open = b"<think>";
    if rest.len() < open.len() {
        return if open.starts_with(rest) {
            Err(())
        } else {
            Ok((None, Some(0)))
        };
    }
    if !rest.starts_with(open) {
        return Ok((None, Some(0)));
    }
    let inner = lead + open.len();
    let start = inner
        + all[inner..]
            .iter()
            .take_while(|b| b.is_ascii_whitespace())
            .count();
    let close = b"</think>";
    match crate::run::find(&all[inner..], close) {
        Some(at) => {
            let end = inner + at;
            let after = end + close.len();
            let base = after
                + all[after..]
                    .iter()
                    .take_while(|b| b.is_ascii_whitespace())
                    .count();
            Ok((Some((start.min(end), end)), Some(base)))
        }
        None => {
            let (safe, _) = safe_prefix(&all[start.min(all.len())..], &["</think>"]);
            Ok((
                Some((start.min(all.len()), start.min(all.len()) + safe)),
                None,
            ))
        }
    }
}

impl SseWriter {
    fn chunk(&self, choices: Value) -> Value {
        let mut c = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": null,
            "choices": choices,
        });
        if self.include_usage {
            c["usage"] = Value::Null;
        }
        c
    }

    fn send(&self, v: Value) -> bool {
        self.tx.send(Event::default().data(v.to_string())).is_ok()
    }

    fn delta(&self, index: usize, delta: Value, finish: Option<&str>) -> bool {
        self.send(self.chunk(
            json!([{"index": index, "delta": delta, "logprobs": null, "finish_reason": finish}]),
        ))
    }

    fn ensure_role(&mut self, index: usize) -> bool {
        if self.sent.len() <= index {
            self.sent.resize(index + 1, (0, false, false));
        }
        if !self.sent[index].1 {
            self.sent[index].1 = true;
            return self.delta(index, json!({"role": "assistant", "content": ""}), None);
        }
        true
    }

    fn finish(&mut self, choices: &[ChoiceOut], traces: &[Option<Value>], prompt_tokens: usize) {
        for (i, c) in choices.iter().enumerate() {
            self.ensure_role(i);
            if self.reasoning {
                if self.think.len() <= i {
                    self.think.resize(i + 1, Think::default());
                }
                let t = self.think[i];
                if let Some(r) = &c.reasoning {
                    if r.len() > t.sent && r.is_char_boundary(t.sent) {
                        self.delta(i, json!({"reasoning_content": &r[t.sent..]}), None);
                    }
                }
            }
            let sent = self.sent[i].0;
            if c.content.len() > sent && c.content.is_char_boundary(sent) {
                self.delta(i, json!({"content": &c.content[sent..]}), None);
            }
            if !c.calls.is_empty() {
                let calls: Vec<Value> = tool_calls_json(c)
                    .into_iter()
                    .enumerate()
                    .map(|(k, mut v)| {
                        v["index"] = json!(k);
                        v
                    })
                    .collect();
                self.delta(i, json!({"tool_calls": calls}), None);
            }
            let mut last = self.chunk(json!([{"index": i, "delta": {}, "logprobs": logprobs_json(c), "finish_reason": c.finish_reason}]));
            if self.include_usage {
                last["usage"] = Value::Null;
            }
            if let Some(Some(t)) = traces.get(i) {
                last["choices"][0]["constrain_trace"] = t.clone();
            }
            self.send(last);
        }
        if self.include_usage {
            let mut u = self.chunk(json!([]));
            u["usage"] = usage(prompt_tokens, choices);
            self.send(u);
        }
        let _ = self.tx.send(Event::default().data("[DONE]"));
    }
}

impl Sink for SseWriter {
    fn bytes(&mut self, index: usize, all: &[u8]) -> bool {
        if !self.ensure_role(index) {
            return false;
        }
        let mut all = all;
        if self.reasoning {
            if self.think.len() <= index {
                self.think.resize(index + 1, Think::default());
            }
            let Ok((block, base)) = think_of(all) else {
                return !self.tx.is_closed();
            };
            if let Some((start, end)) = block {
                let t = &mut self.think[index];
                let valid = match std::str::from_utf8(&all[start..end]) {
                    Ok(_) => end,
                    Err(e) => start + e.valid_up_to(),
                };
                if valid > start + t.sent {
                    let text = String::from_utf8_lossy(&all[start + t.sent..valid]).into_owned();
                    t.sent = valid - start;
                    if !self.delta(index, json!({"reasoning_content": text}), None) {
                        return false;
                    }
                }
            }
            match base {
                // The content, counted from its own start.
                Some(b) => all = &all[b.min(all.len())..],
                None => return !self.tx.is_closed(),
            }
        }
        let markers: Vec<&str> = self.markers.iter().map(String::as_str).collect();
        let (mut end, _) = safe_prefix(all, &markers);
        if self.bare && crate::run::may_be_bare_call(all) {
            end = 0;
        }
        let sent = self.sent[index].0;
        if end > sent {
            let text = String::from_utf8_lossy(&all[sent..end]).into_owned();
            self.sent[index].0 = end;
            return self.delta(index, json!({"content": text}), None);
        }
        !self.tx.is_closed()
    }
}

fn stream_response(
    state: Arc<ServerState>,
    prepared: Prepared,
    slot: crate::scheduler::Slot,
    guard: CancelOnDrop,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let mut writer = SseWriter {
        tx,
        id: random_id("chatcmpl-"),
        created: now(),
        model: state.model_name.clone(),
        include_usage: prepared.include_usage,
        markers: content_markers(&prepared.job),
        bare: prepared.job.trigger.is_some(),
        sent: Vec::new(),
        reasoning: prepared.job.reasoning,
        think: Vec::new(),
    };
    let prompt_tokens = prepared.prompt_tokens;
    let job = prepared.job;
    let kept = prepared.keep;
    let st = state.clone();
    tokio::task::spawn_blocking(move || {
        match run_job(slot, &job, &st.vocab, &st.tokenizer, &mut writer) {
            Ok(choices) => {
                keep(&st, &kept);
                let traces: Vec<Option<Value>> =
                    choices.iter().map(|c| trace_json(&st, &job, c)).collect();
                writer.finish(&choices, &traces, prompt_tokens)
            }
            Err(e) => {
                writer.send(e.body());
                let _ = writer.tx.send(Event::default().data("[DONE]"));
            }
        }
    });
    // The stream owns the cancel guard: dropped with the connection.
    let stream = futures_util::stream::unfold((rx, guard), |(mut rx, g)| async move {
        rx.recv()
            .await
            .map(|e| (Ok::<_, std::convert::Infallible>(e), (rx, g)))
    });
    let mut r = Sse::new(stream).into_response();
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    r
}
