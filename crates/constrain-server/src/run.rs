//! One request's generation, on the blocking pool: `n` choices, one after
//! the other in the request's slot, each through
//! `constrain_model::generate::generate` over an [`Interruptible`] model.
//! Output bytes go to a [`Sink`] as they are taken (the SSE writer, or
//! nothing); stop strings are watched here and end a free-text choice.

use crate::chat::{split_tool_calls, ParsedCall, TOOL_CALL_OPEN};
use crate::error::ApiError;
use crate::scheduler::{Interruptible, Slot};
use constrain::vocab::{TextTokenizer, Vocabulary};
use constrain::{Compiled, TokenId};
use constrain_model::generate::{generate, GenerateConfig, GenerateError, StopReason};
use constrain_model::trace::{self, TraceStep};
use constrain_model::ModelError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a job needs besides the model.
pub struct Job {
    /// The prompt, as text (a trigger phase re-tokenizes it with the text so far).
    pub prompt_text: String,
    /// The prompt's tokens.
    pub prompt: Vec<TokenId>,
    /// The output's constraint; `None` for free text.
    pub compiled: Option<Arc<Compiled>>,
    /// Under `tool_choice: "auto"`: the constraint after `<tool_call>\n`.
    pub trigger: Option<Arc<Compiled>>,
    /// Output text the prompt already holds (see [`crate::chat::Plan::prefix`]).
    pub prefix: String,
    /// Generation settings (budget, sampling, seed of the first choice).
    pub config: GenerateConfig,
    /// Number of choices to generate; choice `i` uses seed `config.seed + i`.
    pub n: usize,
    /// Stop strings (free text only).
    pub stop: Vec<String>,
    /// Tool calls may appear in the output (see [`crate::chat::Plan::tools_active`]).
    pub tools_active: bool,
    /// The calls' format when the tools went through a structural tag
    /// (`--tool-format`), and the request's tools to type them.
    pub tool_format: Option<constrain::tools::ToolFormat>,
    /// Qwen's bare call objects are calls too (no `--tool-format`).
    pub bare_calls: bool,
    /// The request's `tools`, as given.
    pub tools: Vec<serde_json::Value>,
    /// A leading `<think>` block is reasoning (`--reasoning`).
    pub reasoning: bool,
    /// The constraint describes a document (see [`crate::chat::Plan::structured`]).
    pub structured: bool,
    /// Set when the client goes away; generation stops at the next step.
    pub cancel: Arc<AtomicBool>,
    /// `top_logprobs` when `logprobs` is asked for (jump-forward is then
    /// off, so that every output token is sampled from a distribution).
    pub logprobs: Option<usize>,
    /// `constrain_trace: true`: record each output token's
    /// [`TraceStep`] (jump-forward is then off too, so every step has
    /// logits).
    pub trace: bool,
}

/// One finished choice.
#[derive(Debug, Clone)]
pub struct ChoiceOut {
    /// The message text (before any tool call; cut at a stop string).
    pub content: String,
    /// The thinking, with `--reasoning` (`message.reasoning_content`).
    pub reasoning: Option<String>,
    /// The tool calls parsed out of the output, in order.
    pub calls: Vec<ParsedCall>,
    /// The calls are custom tool calls (`arguments` holds the input).
    pub custom: bool,
    /// OpenAI's `finish_reason`: `stop`, `length` or `tool_calls`.
    pub finish_reason: &'static str,
    /// Tokens generated for this choice.
    pub completion_tokens: usize,
    /// OpenAI's `logprobs.content` entries, when asked for.
    pub logprobs: Option<Vec<serde_json::Value>>,
    /// The step trace, when asked for (both phases of a tool call).
    pub trace: Option<Vec<TraceStep>>,
}

/// Receives output as it is generated (streaming).
pub trait Sink {
    /// The output of choice `index` so far, after new bytes; `false` when
    /// the receiver is gone.
    fn bytes(&mut self, index: usize, all: &[u8]) -> bool;
}

/// A sink for non-streaming requests.
pub struct NoSink;
impl Sink for NoSink {
    fn bytes(&mut self, _: usize, _: &[u8]) -> bool {
        true
    }
}

/// How one generation phase ended.
struct Phase {
    /// `None`: a watched string appeared (stop string or tool-call trigger).
    stop: Option<StopReason>,
    accepted: bool,
    tokens: usize,
}

/// Runs one phase of choice `index`: appends to `out`, stops early (through
/// the interruptible model) when one of `watch` appears in `out[from..]`.
#[allow(clippy::too_many_arguments)]
fn phase(
    slot: &mut Slot,
    job: &Job,
    index: usize,
    compiled: Option<&Arc<Compiled>>,
    prompt: &[TokenId],
    config: &GenerateConfig,
    out: &mut Vec<u8>,
    from: usize,
    watch: &[&str],
    vocab: &Vocabulary,
    tokenizer: &TextTokenizer,
    sink: &mut dyn Sink,
    lp: &mut Vec<serde_json::Value>,
    tr: &mut Vec<TraceStep>,
) -> Result<Phase, ApiError> {
    let hit = AtomicBool::new(false);
    let mut tokens = 0usize;
    let mut matcher = compiled.map(|c| c.matcher());
    let last = std::cell::RefCell::new(Vec::new());
    let mut shadow = compiled.map(|c| c.matcher());
    let longest = watch.iter().map(|w| w.len()).max().unwrap_or(0);
    let result = {
        let mut on_bytes = |b: &[u8]| {
            tokens += 1;
            if job.trace {
                let l = last.borrow();
                if let Some(c) = chosen_id(&l, b, shadow.as_ref(), vocab) {
                    let mask = shadow.as_ref().map(|m| m.allowed());
                    tr.push(trace::sampled_step(tr.len(), &l, mask, c, vocab));
                    if job.logprobs.is_none() {
                        if let Some(m) = shadow.as_mut() {
                            let _ = m.advance(c);
                        }
                    }
                }
            }
            if let Some(k) = job.logprobs {
                lp.push(logprob_entry(&last.borrow(), b, k, shadow.as_mut(), vocab));
            }
            out.extend_from_slice(b);
            if longest > 0 {
                let lo = out.len().saturating_sub(b.len() + longest).max(from);
                if watch
                    .iter()
                    .any(|w| find(&out[lo..], w.as_bytes()).is_some())
                {
                    hit.store(true, Ordering::SeqCst);
                }
            }
            if job.trigger.is_some() && bare_call_start(&out[from..]).is_some() {
                hit.store(true, Ordering::SeqCst);
            }
            if !sink.bytes(index, out) {
                job.cancel.store(true, Ordering::SeqCst);
            }
        };
        let mut model = Interruptible {
            inner: slot.model().as_mut(),
            cancel: &job.cancel,
            stop: &hit,
            last: (job.logprobs.is_some() || job.trace).then_some(&last),
        };
        generate(
            &mut model,
            vocab,
            Some(tokenizer),
            matcher.as_mut(),
            prompt,
            config,
            &mut on_bytes,
        )
    };
    match result {
        Ok(g) => Ok(Phase {
            stop: Some(g.stop),
            accepted: g.accepted,
            tokens,
        }),
        Err(GenerateError::Model(ModelError::Interrupted(_))) if hit.load(Ordering::SeqCst) => {
            Ok(Phase {
                stop: None,
                accepted: false,
                tokens,
            })
        }
        Err(GenerateError::Model(ModelError::Interrupted(why))) => {
            Err(ApiError::internal(format!("generation interrupted: {why}")))
        }
        Err(e) => Err(map_generate_error(e)),
    }
}

/// Runs the job's choices in `slot`.
pub fn run_job(
    mut slot: Slot,
    job: &Job,
    vocab: &Vocabulary,
    tokenizer: &TextTokenizer,
    sink: &mut dyn Sink,
) -> Result<Vec<ChoiceOut>, ApiError> {
    let mut choices = Vec::with_capacity(job.n);
    let free_text = !job.structured;
    let mut watch: Vec<&str> = Vec::new();
    if free_text {
        watch.extend(job.stop.iter().map(String::as_str));
    }
    if job.trigger.is_some() {
        watch.push(TOOL_CALL_OPEN);
    }
    for i in 0..job.n {
        let mut config = job.config.clone();
        config.seed = config.seed.wrapping_add(i as u64);
        let mut out: Vec<u8> = job.prefix.as_bytes().to_vec();
        let from = out.len();
        let mut lp = Vec::new();
        let mut tr = Vec::new();
        let first = phase(
            &mut slot,
            job,
            i,
            job.compiled.as_ref(),
            &job.prompt,
            &config,
            &mut out,
            from,
            &watch,
            vocab,
            tokenizer,
            sink,
            &mut lp,
            &mut tr,
        )?;
        let mut tokens = first.tokens;
        let mut stop = first.stop;
        let mut accepted = first.accepted;
        let mut trigger_cut = false;
        // The model opened a tool call: constrain the rest of it.
        let opened =
            find(&out[from..], TOOL_CALL_OPEN.as_bytes()).or_else(|| bare_call_start(&out[from..]));
        if let (Some(trigger), Some(at)) = (&job.trigger, opened) {
            let text_end = from + at;
            let stop_before = job
                .stop
                .iter()
                .filter_map(|s| find(&out[from..], s.as_bytes()))
                .any(|p| p < at);
            if !stop_before {
                out.truncate(text_end);
                let left = config.max_tokens.saturating_sub(tokens);
                let head = format!(
                    "{}{TOOL_CALL_OPEN}\n",
                    String::from_utf8_lossy(&out[from..])
                );
                let prompt2 = tokenizer
                    .encode(&format!("{}{head}", job.prompt_text))
                    .map_err(|e| {
                        ApiError::internal(format!("tokenizing the tool call failed: {e}"))
                    })?;
                let room = slot.model().context_length().saturating_sub(prompt2.len());
                let budget = left.min(room);
                let needed = trigger.matcher().tokens_to_accept().unwrap_or(u32::MAX) as usize;
                if budget >= needed.max(1) {
                    out.extend_from_slice(format!("{TOOL_CALL_OPEN}\n").as_bytes());
                    let config2 = config.clone().max_tokens(budget);
                    let second = phase(
                        &mut slot,
                        job,
                        i,
                        Some(trigger),
                        &prompt2,
                        &config2,
                        &mut out,
                        from,
                        &[],
                        vocab,
                        tokenizer,
                        sink,
                        &mut lp,
                        &mut tr,
                    )?;
                    tokens += second.tokens;
                    stop = second.stop;
                    accepted = second.accepted;
                } else {
                    // No room for a complete call: the answer is the text.
                    trigger_cut = true;
                }
            }
        }
        let whole = String::from_utf8_lossy(&out).into_owned();
        let (reasoning, text) = if job.reasoning {
            let (r, rest) = crate::chat::split_reasoning(&whole);
            (r, rest.to_string())
        } else {
            (None, whole)
        };
        let (mut content, calls) = if let Some(f) = job.tool_format {
            crate::calls::parse_calls_in(f, job.bare_calls, &text, &job.tools)
        } else if crate::custom::active(&job.tools) {
            crate::custom::split_call(&text, &job.tools)
        } else if job.tools_active {
            split_tool_calls(&text)
        } else {
            (text, Vec::new())
        };
        let mut finish = match stop {
            _ if trigger_cut => "length",
            None => "stop",
            Some(StopReason::Complete) => "stop",
            Some(StopReason::MaxTokens) if job.structured && accepted => "stop",
            Some(StopReason::MaxTokens) if !calls.is_empty() && accepted => "stop",
            Some(StopReason::MaxTokens) => "length",
        };
        if free_text && calls.is_empty() {
            if let Some(at) = job
                .stop
                .iter()
                .filter_map(|s| content.find(s.as_str()))
                .min()
            {
                content.truncate(at);
                finish = "stop";
            }
        }
        if !calls.is_empty() {
            finish = "tool_calls";
        }
        choices.push(ChoiceOut {
            content,
            reasoning,
            calls,
            custom: crate::custom::active(&job.tools),
            finish_reason: finish,
            completion_tokens: tokens,
            logprobs: job.logprobs.map(|_| lp),
            trace: job.trace.then_some(tr),
        });
    }
    Ok(choices)
}

/// Where a bare call starts: the text, after leading whitespace, opens with
/// `{"name"` (spaces allowed), as Qwen's small models often write a call
/// without `<tool_call>`; llama.cpp's Hermes parser takes it as a call too.
pub fn bare_call_start(text: &[u8]) -> Option<usize> {
    let at = text.iter().position(|b| !b.is_ascii_whitespace())?;
    let rest = &text[at..];
    let rest = rest.strip_prefix(b"{")?;
    let rest = &rest[rest.iter().position(|b| !b.is_ascii_whitespace())?..];
    rest.starts_with(b"\"name\"").then_some(at)
}

/// Whether an answer so far may still be (or is) a bare call: it opens with
/// `{` and has not yet shown enough to rule `{"name"` out.
pub fn may_be_bare_call(text: &[u8]) -> bool {
    let shown: Vec<u8> = text
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .take(7)
        .collect();
    let want = b"{\"name\"";
    bare_call_start(text).is_some() || (!shown.is_empty() && want.starts_with(&shown))
}

/// The token a step took, from its bytes: the likeliest id with these
/// bytes that the constraint (`shadow`) allows (several ids can spell the
/// same bytes; the sampler is shown the same logits).
fn chosen_id(
    logits: &[f32],
    b: &[u8],
    shadow: Option<&constrain::Matcher>,
    vocab: &Vocabulary,
) -> Option<TokenId> {
    (0..logits.len())
        .map(|i| TokenId(i as u32))
        .filter(|&t| vocab.token_bytes(t).is_some_and(|x| x == b))
        .filter(|&t| shadow.is_none_or(|m| m.is_allowed(t)))
        .max_by(|x, y| logits[x.as_usize()].total_cmp(&logits[y.as_usize()]))
}

/// One `logprobs.content` entry: the sampled token (its bytes `b`), its log
/// probability under the model's distribution `logits` (temperature 1, no
/// mask), and the `k` most likely tokens, each with `allowed`: whether the
/// constraint (`shadow`, the matcher at this step) let it through.
fn logprob_entry(
    logits: &[f32],
    b: &[u8],
    k: usize,
    shadow: Option<&mut constrain::Matcher>,
    vocab: &Vocabulary,
) -> serde_json::Value {
    use serde_json::json;
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let lse = max + logits.iter().map(|&x| (x - max).exp()).sum::<f32>().ln();
    // The k best ids (a small sorted list; k <= 20).
    let mut top: Vec<(f32, usize)> = Vec::with_capacity(k + 1);
    for (i, &x) in logits.iter().enumerate() {
        if top.len() < k || top.last().is_some_and(|&(y, _)| x > y) {
            let at = top.partition_point(|&(y, _)| y >= x);
            top.insert(at, (x, i));
            top.truncate(k);
        }
    }
    // The sampled id: the most likely id with these bytes.
    let chosen = (0..logits.len())
        .filter(|&i| vocab.token_bytes(TokenId(i as u32)).is_some_and(|t| t == b))
        .max_by(|&x, &y| logits[x].total_cmp(&logits[y]));
    let allowed = |i: usize| {
        shadow
            .as_ref()
            .is_none_or(|m| m.is_allowed(TokenId(i as u32)))
    };
    let entry = |i: usize| {
        let bytes = vocab.decode(&[TokenId(i as u32)]);
        json!({
            "token": String::from_utf8_lossy(&bytes),
            "logprob": logits[i] - lse,
            "bytes": bytes,
            "allowed": allowed(i),
        })
    };
    let top_logprobs: Vec<_> = top.iter().map(|&(_, i)| entry(i)).collect();
    let logprob = chosen.map_or(f32::NEG_INFINITY, |i| logits[i] - lse);
    if let (Some(m), Some(i)) = (shadow, chosen) {
        let _ = m.advance(TokenId(i as u32));
    }
    json!({
        "token": String::from_utf8_lossy(b),
        "logprob": if logprob.is_finite() { json!(logprob) } else { json!(-9999.0) },
        "bytes": b,
        "top_logprobs": top_logprobs,
    })
}

pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The part of `all` (an output so far) that can be shown as content now:
/// before any tool call or stop string, minus a tail that could still grow
/// into one, cut at a UTF-8 boundary.
pub fn safe_prefix(all: &[u8], markers: &[&str]) -> (usize, bool) {
    let mut end = all.len();
    let mut ended = false;
    for m in markers {
        if let Some(p) = find(all, m.as_bytes()) {
            if p < end {
                end = p;
                ended = true;
            }
        }
    }
    if !ended {
        // Hold back a tail that is a prefix of a marker.
        let mut hold = 0;
        for m in markers {
            let m = m.as_bytes();
            for k in (1..m.len()).rev() {
                if k <= end && all[end - k..end] == m[..k] {
                    hold = hold.max(k);
                    break;
                }
            }
        }
        end -= hold;
    }
    let valid = match std::str::from_utf8(&all[..end]) {
        Ok(_) => end,
        Err(e) => e.valid_up_to(),
    };
    (valid, ended)
}

/// The markers that end streamed content for a job.
pub fn content_markers(job: &Job) -> Vec<String> {
    let mut m = Vec::new();
    if let Some(f) = job.tool_format {
        m.extend(
            crate::calls::openers_text(f, job.bare_calls)
                .into_iter()
                .map(str::to_string),
        );
    } else if job.tools_active {
        m.push(TOOL_CALL_OPEN.to_string());
    }
    if !job.structured {
        m.extend(job.stop.iter().cloned());
    }
    m
}

/// A generation error as an HTTP answer.
pub fn map_generate_error(e: GenerateError) -> ApiError {
    match e {
        GenerateError::BudgetTooSmall { max_tokens, needed } => ApiError::field(
            "max_tokens",
            format!("max_tokens {max_tokens} is too small: the constraint needs at least {needed} tokens to produce a complete answer"),
        ),
        e @ (GenerateError::PromptTooLong { .. } | GenerateError::ContextTooSmall { .. }) => {
            ApiError::field("messages", e.to_string()).with_code("context_length_exceeded")
        }
        GenerateError::EmptyPrompt => ApiError::field("messages", "the prompt is empty"),
        e => ApiError::internal(format!("generation failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_prefix_holds_back_marker_prefixes() {
        let m = ["<tool_call>"];
        assert_eq!(safe_prefix(b"hello", &m), (5, false));
        assert_eq!(safe_prefix(b"hello <tool", &m), (6, false));
        assert_eq!(safe_prefix(b"hi<tool_call>\n{", &m), (2, true));
        // A split UTF-8 character waits for its last byte.
        assert_eq!(safe_prefix(&[b'a', 0xC3], &m), (1, false));
    }

    #[test]
    fn bare_calls_are_recognised_at_the_start_only() {
        assert_eq!(bare_call_start(b"{\"name\": \"f\""), Some(0));
        assert_eq!(bare_call_start(b"\n { \"name\""), Some(2));
        assert_eq!(bare_call_start(b"{\"nam"), None);
        assert_eq!(bare_call_start(b"{\"city\": 1}"), None);
        assert_eq!(bare_call_start(b"Sure: {\"name\""), None);
        assert!(may_be_bare_call(b" {\"na"));
        assert!(!may_be_bare_call(b"{\"city\""));
        assert!(!may_be_bare_call(b"Hello"));
    }
}
