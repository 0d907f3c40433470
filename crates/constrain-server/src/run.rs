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
use constrain_model::ModelError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// What a job needs besides the model.
pub struct Job {
    pub prompt: Vec<TokenId>,
    pub compiled: Option<Arc<Compiled>>,
    pub config: GenerateConfig,
    pub n: usize,
    /// Stop strings (free text only).
    pub stop: Vec<String>,
    pub tools_active: bool,
    pub structured: bool,
    pub cancel: Arc<AtomicBool>,
}

/// One finished choice.
#[derive(Debug, Clone)]
pub struct ChoiceOut {
    /// The message text (before any tool call; cut at a stop string).
    pub content: String,
    pub calls: Vec<ParsedCall>,
    pub finish_reason: &'static str,
    pub completion_tokens: usize,
}

/// Receives output as it is generated (streaming).
pub trait Sink {
    /// New bytes of choice `index`; `false` when the receiver is gone.
    fn bytes(&mut self, index: usize, all: &[u8]) -> bool;
}

/// A sink for non-streaming requests.
pub struct NoSink;
impl Sink for NoSink {
    fn bytes(&mut self, _: usize, _: &[u8]) -> bool {
        true
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
    for i in 0..job.n {
        let mut config = job.config.clone();
        config.seed = config.seed.wrapping_add(i as u64);
        let stop_flag = AtomicBool::new(false);
        let mut out: Vec<u8> = Vec::new();
        let mut tokens = 0usize;
        let mut matcher = job.compiled.as_ref().map(|c| c.matcher());
        let free_text = !job.structured && !job.tools_active;
        let result = {
            let mut on_bytes = |b: &[u8]| {
                tokens += 1;
                out.extend_from_slice(b);
                if free_text && !job.stop.is_empty() {
                    let from = out.len().saturating_sub(b.len() + max_len(&job.stop));
                    if job.stop.iter().any(|s| find(&out[from..], s.as_bytes()).is_some()) {
                        stop_flag.store(true, Ordering::SeqCst);
                    }
                }
                if !sink.bytes(i, &out) {
                    job.cancel.store(true, Ordering::SeqCst);
                }
            };
            let mut model = Interruptible {
                inner: slot.model().as_mut(),
                cancel: &job.cancel,
                stop: &stop_flag,
            };
            generate(
                &mut model,
                vocab,
                Some(tokenizer),
                matcher.as_mut(),
                &job.prompt,
                &config,
                &mut on_bytes,
            )
        };
        let (stop, accepted) = match result {
            Ok(g) => (Some(g.stop), g.accepted),
            Err(GenerateError::Model(ModelError::Interrupted(_))) if stop_flag.load(Ordering::SeqCst) => (None, false),
            Err(GenerateError::Model(ModelError::Interrupted(why))) => {
                return Err(ApiError::internal(format!("generation interrupted: {why}")))
            }
            Err(e) => return Err(map_generate_error(e)),
        };
        let text = String::from_utf8_lossy(&out).into_owned();
        let (mut content, calls) = if job.tools_active {
            split_tool_calls(&text)
        } else {
            (text, Vec::new())
        };
        let mut finish = match stop {
            None => "stop",
            Some(StopReason::Complete) => "stop",
            Some(StopReason::MaxTokens) if job.structured && accepted => "stop",
            Some(StopReason::MaxTokens) => "length",
        };
        if free_text {
            if let Some(at) = job.stop.iter().filter_map(|s| content.find(s.as_str())).min() {
                content.truncate(at);
                finish = "stop";
            }
        }
        if !calls.is_empty() {
            finish = "tool_calls";
        }
        choices.push(ChoiceOut {
            content,
            calls,
            finish_reason: finish,
            completion_tokens: tokens,
        });
    }
    Ok(choices)
}

fn max_len(stop: &[String]) -> usize {
    stop.iter().map(String::len).max().unwrap_or(0)
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
    if job.tools_active {
        m.push(TOOL_CALL_OPEN.to_string());
    }
    if !job.structured && !job.tools_active {
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
}
