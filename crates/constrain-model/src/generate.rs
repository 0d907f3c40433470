//! # Constrained generation
//!
//! The loop that ties the pieces together. Prefill the prompt in one batched
//! pass, then step: **logits → guide mask → sampling pipeline → token → guide →
//! stream**, until the guide is finished, EOS is picked, or the token budget is
//! spent. Every stop is one of [`StopReason`]; every failure is a
//! [`GenerateError`] (before generation: bad budget, prompt too long, widths
//! that disagree; during it: the model or sampler failing).
//!
//! ## Budget-safe completion
//!
//! With a guide and `max_tokens = N`, the output is always complete: before
//! generating, `N` below [`Matcher::tokens_to_accept`] is
//! [`GenerateError::BudgetTooSmall`] (naming the minimum); at each step, a
//! sampled token after which the remaining budget could not reach acceptance
//! (`tokens_to_accept_after(t) > remaining - 1`) is rejected and the token is
//! drawn again from the *original* logits restricted to the tokens that keep
//! the budget. That is exact: the second draw is from the same distribution as
//! masking those tokens up front (it is rejection sampling). When the budget
//! runs out the text is therefore in the language ([`Generation::accepted`]).
//! The logits are kept for that redraw only on steps where it can happen:
//! while more tokens remain than the index's largest budget
//! ([`Matcher::always_fits`]), every token fits and nothing is copied.
//!
//! ## Jump-forward
//!
//! When the guide admits exactly one continuation for a while
//! ([`Matcher::forced_bytes`], e.g. `", "arguments": {"` in a tool call), those
//! bytes are tokenized with the real tokenizer and appended without sampling,
//! and the model reads them in one batched pass together with the token just
//! sampled (at the very start, together with the prompt). The last forced
//! token is held back unless it completes the output: the model then picks it
//! (the mask still forces the bytes) so the token boundary with what follows
//! is the model's, not an artefact of tokenizing the forced bytes alone.
//! Forced tokens count against `max_tokens` and pass the same budget check.
//!
//! ## Tracing
//!
//! [`generate_traced`] runs the same loop and also records, per output token,
//! what the model wanted and what the constraint allowed ([`crate::trace`]):
//! it copies the raw logits before the sampler works on them in place and
//! draws nothing from the random source, so the output is the same.
//!
//! ## Masks during the pass
//!
//! The next step's mask depends only on the matcher's state after the
//! token just taken, known before the model's pass over it starts: with
//! [`GenerateConfig::mask_overlap`] (the default) a worker thread computes
//! it during the pass and the step waits only for what is left
//! (`mask_ahead.rs`; the output is the same either way, and
//! [`GenerationStats::mask`] counts the steps that waited). The model gets
//! the mask before its output head ([`LanguageModel::forward_masked`]) and
//! may compute only the allowed logits: constrain's Qwen skips the tiles of
//! its `Q8_0` head that hold no allowed token when they are most of it.
//!
//! ## What the sampler sees
//!
//! Penalties (`repetition_penalty`...) look at the generated tokens only, not
//! the prompt: the prompt holds the schema, whose keys the output must repeat.
//!
//! ## Where the loops live
//!
//! This file holds the plain loop ([`generate`]: the `Decoder` every loop
//! steps). Beside it: `guidance_loop.rs` (classifier-free guidance and
//! contrastive decoding, a second sequence fed with the first),
//! `speculative_loop.rs` (a draft model proposes, the model verifies),
//! `beam_loop.rs` ([`beam_search`]); the values they share are in
//! `types.rs`, what every step does with its logits (the budget rule, the
//! trace) in `step.rs`, and [`Engine`] (`engine.rs`) runs any of them over
//! a loaded model.

use crate::trace::TraceStep;
use crate::LanguageModel;
use constrain::matcher::Matcher;
use constrain::sampling::Sampler;
use constrain::vocab::{TextTokenizer, TokenId, Vocabulary};
use std::time::Instant;

pub use constrain::schema::tools_schema;

mod beam_loop;
mod engine;
mod guidance_loop;
mod mask_ahead;
mod speculative_loop;
mod step;
mod types;

pub use beam_loop::{
    beam_search, beam_search_traced, BeamConfig, BeamGeneration, Candidate, OneByOne,
};
pub use engine::Engine;
pub use guidance_loop::{generate_guided, generate_guided_traced, Guidance};
pub use speculative_loop::{generate_speculative, generate_speculative_traced, SpeculativeConfig};
pub use types::{
    BeamError, GenerateConfig, GenerateError, Generation, GenerationStats, MaskStats,
    SpeculativeStats, StopReason,
};

/// Generates from `prompt` with `model`, under `matcher` when given.
/// `tokenizer` enables jump-forward (it tokenizes forced bytes); `on_bytes`
/// receives each output token's bytes as soon as it is taken.
pub fn generate<M: LanguageModel + ?Sized>(
    model: &mut M,
    vocab: &Vocabulary,
    tokenizer: Option<&TextTokenizer>,
    matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    config: &GenerateConfig,
    on_bytes: &mut dyn FnMut(&[u8]),
) -> Result<Generation, GenerateError> {
    run(
        model, vocab, tokenizer, matcher, prompt, config, on_bytes, false,
    )
    .map(|(g, _)| g)
}

/// [`generate`], also recording one [`TraceStep`] per output token (see
/// [`crate::trace`]). The generation is the same as without the trace: same
/// tokens, same bytes handed to `on_bytes`, same random draws.
pub fn generate_traced<M: LanguageModel + ?Sized>(
    model: &mut M,
    vocab: &Vocabulary,
    tokenizer: Option<&TextTokenizer>,
    matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    config: &GenerateConfig,
    on_bytes: &mut dyn FnMut(&[u8]),
) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
    run(
        model, vocab, tokenizer, matcher, prompt, config, on_bytes, true,
    )
}

#[allow(clippy::too_many_arguments)]
fn run<M: LanguageModel + ?Sized>(
    model: &mut M,
    vocab: &Vocabulary,
    tokenizer: Option<&TextTokenizer>,
    matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    config: &GenerateConfig,
    on_bytes: &mut dyn FnMut(&[u8]),
    trace: bool,
) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
    check_request(model, vocab, matcher.as_deref(), prompt, config)?;
    let d = Decoder::new(vocab, tokenizer, matcher, prompt, config, on_bytes, trace)?;
    drive(d, model, prompt)
}

/// `e`, unless the matcher's lazy automaton hit a size limit: then the
/// limit, the cause of whatever went wrong after it (a token a mask let in
/// that its walk can no longer follow, a budget that no longer knows every
/// distance).
fn or_limit(m: &Matcher, e: GenerateError) -> GenerateError {
    match m.index().lazy_limit_error() {
        Some(limit) => GenerateError::LimitHit { limit },
        None => e,
    }
}

/// The plain loop: prefill, then steps until the output is done.
fn drive<M: LanguageModel + ?Sized>(
    mut d: Decoder<'_>,
    model: &mut M,
    prompt: &[TokenId],
) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
    let t0 = Instant::now();
    let mut logits = d.prefill(model, prompt)?;
    d.out.stats.prefill_time = t0.elapsed();
    let t1 = Instant::now();
    while let Some(l) = logits {
        logits = d.step(model, l)?;
    }
    d.out.stats.decode_time = t1.elapsed();
    // A lazy automaton past a size limit no longer knows every distance,
    // so the budget may have let the output run out unfinished: that is
    // the limit's failure, named, never an output cut in half.
    if let Some(m) = d.matcher.as_deref() {
        if !m.is_accepting() {
            if let Some(limit) = m.index().lazy_limit_error() {
                return Err(GenerateError::LimitHit { limit });
            }
        }
    }
    Ok(d.finish())
}

/// Everything that can be refused before the model runs: an empty or too
/// long prompt, widths that disagree, a budget below the constraint's
/// minimum.
fn check_request<M: LanguageModel + ?Sized>(
    model: &M,
    vocab: &Vocabulary,
    matcher: Option<&Matcher>,
    prompt: &[TokenId],
    config: &GenerateConfig,
) -> Result<(), GenerateError> {
    let width = model.logits_width();
    if prompt.is_empty() {
        return Err(GenerateError::EmptyPrompt);
    }
    let widths = [
        Some(vocab.logits_width()),
        matcher.map(|m| m.index().vocab().logits_width()),
    ];
    if let Some(w) = widths.into_iter().flatten().find(|&w| w != width) {
        return Err(GenerateError::WidthMismatch {
            model: width,
            vocab: w,
        });
    }
    let context = model.context_length();
    if prompt.len() >= context {
        return Err(GenerateError::PromptTooLong {
            prompt: prompt.len(),
            context,
        });
    }
    if prompt.len() + config.max_tokens > context {
        return Err(GenerateError::ContextTooSmall {
            prompt: prompt.len(),
            max_tokens: config.max_tokens,
            context,
        });
    }
    if let Some(needed) = matcher.and_then(|m| m.tokens_to_accept()) {
        if needed as usize > config.max_tokens {
            return Err(GenerateError::BudgetTooSmall {
                max_tokens: config.max_tokens,
                needed,
            });
        }
    }
    Ok(())
}

/// The state of one generation: the loop is `prefill`, then `step` until
/// it returns no logits.
struct Decoder<'a> {
    vocab: &'a Vocabulary,
    /// `Some` when jump-forward is on.
    tokenizer: Option<&'a TextTokenizer>,
    matcher: Option<&'a mut Matcher>,
    sampler: Sampler,
    config: &'a GenerateConfig,
    on_bytes: &'a mut dyn FnMut(&[u8]),
    out: Generation,
    /// Tokens the model has read (prompt included).
    pos: usize,
    /// The logits before sampling, kept only on steps where a budget redraw
    /// is possible.
    original: Vec<f32>,
    /// The steps so far (recording only when tracing).
    trace: step::Trail,
    /// The second sequence of guidance (classifier-free or contrastive),
    /// fed alongside the model's.
    aux: Option<guidance_loop::Aux<'a>>,
    /// The next step's mask, computed during the model's pass.
    ahead: mask_ahead::MaskAhead,
}

impl<'a> Decoder<'a> {
    fn new(
        vocab: &'a Vocabulary,
        tokenizer: Option<&'a TextTokenizer>,
        matcher: Option<&'a mut Matcher>,
        prompt: &[TokenId],
        config: &'a GenerateConfig,
        on_bytes: &'a mut dyn FnMut(&[u8]),
        trace: bool,
    ) -> Result<Self, GenerateError> {
        Ok(Decoder {
            vocab,
            tokenizer: tokenizer.filter(|_| config.jump_forward),
            matcher,
            sampler: Sampler::new(config.sampling.clone(), config.seed)?,
            config,
            on_bytes,
            out: Generation {
                tokens: Vec::new(),
                bytes: Vec::new(),
                stop: StopReason::MaxTokens,
                accepted: false,
                stats: GenerationStats {
                    prompt_tokens: prompt.len(),
                    ..Default::default()
                },
            },
            pos: 0,
            original: Vec::new(),
            trace: step::Trail::new(trace),
            aux: None,
            ahead: mask_ahead::MaskAhead::new(config.mask_overlap),
        })
    }

    /// The result, once the loop is over.
    fn finish(mut self) -> (Generation, Vec<TraceStep>) {
        self.out.stats.generated_tokens = self.out.tokens.len();
        self.out.accepted = self.matcher.as_deref().is_some_and(|m| m.is_accepting());
        (self.out, self.trace.into_steps())
    }

    /// Feeds the prompt and any forced start of the output in one pass;
    /// `None` when the output is already done.
    fn prefill<M: LanguageModel + ?Sized>(
        &mut self,
        model: &mut M,
        prompt: &[TokenId],
    ) -> Result<Option<Vec<f32>>, GenerateError> {
        let mut batch = prompt.to_vec();
        batch.extend(self.jump_forward()?);
        self.forward(model, &batch)
    }

    /// Picks and takes one token (plus any forced continuation) and runs
    /// the model over them; `None` when the output is done.
    fn step<M: LanguageModel + ?Sized>(
        &mut self,
        model: &mut M,
        mut logits: Vec<f32>,
    ) -> Result<Option<Vec<f32>>, GenerateError> {
        // The mask, before any other use of the matcher: collected from the
        // worker that computed it during the pass, or computed now.
        if let Some(m) = self.matcher.as_deref() {
            self.ahead.wait(m, &mut self.out.stats.mask);
        }
        if self.aux.is_some() {
            logits = self.guide(logits)?;
        }
        // The sampler works in place: the trace reads a copy of the raw logits.
        let raw = self.trace.is_on().then(|| logits.clone());
        let t = self.pick(&mut logits)?;
        if let Some(raw) = raw {
            self.trace_sampled(&raw, t);
        }
        match self.take(t)? {
            Some(batch) => self.forward(model, &batch),
            None => Ok(None),
        }
    }

    /// Takes a picked token: the matcher advances, EOS ends the output
    /// (`None`), any other token is emitted and followed by the forced
    /// continuation (jump-forward). Returns the tokens the model has yet to
    /// read: the token and what was forced after it.
    fn take(&mut self, t: TokenId) -> Result<Option<Vec<TokenId>>, GenerateError> {
        if let Some(m) = self.matcher.as_deref_mut() {
            if let Err(e) = m.advance(t) {
                // (A limit hit while walking the token's bytes.)
                return Err(or_limit(m, e.into()));
            }
        }
        if self.vocab.is_eos(t) {
            self.out.stop = StopReason::Complete;
            return Ok(None);
        }
        self.emit(t);
        let mut batch = vec![t];
        batch.extend(self.jump_forward()?);
        Ok(Some(batch))
    }

    /// Whether the output is done (the matcher is finished, or `max_tokens`
    /// are out); sets the stop reason when it is.
    fn done(&mut self) -> bool {
        if self.matcher.as_deref().is_some_and(|m| m.is_finished()) {
            self.out.stop = StopReason::Complete;
            return true;
        }
        if self.out.tokens.len() == self.config.max_tokens {
            self.out.stop = StopReason::MaxTokens;
            return true;
        }
        false
    }

    /// Runs the model over `batch` unless the output is done (the matcher
    /// is finished, or `max_tokens` are out), which sets the stop reason.
    fn forward<M: LanguageModel + ?Sized>(
        &mut self,
        model: &mut M,
        batch: &[TokenId],
    ) -> Result<Option<Vec<f32>>, GenerateError> {
        if self.done() {
            return Ok(None);
        }
        // The next step's mask depends on the matcher's state only, known
        // now: computed while the pass runs (`mask_ahead.rs`).
        if let Some(m) = self.matcher.as_deref() {
            self.ahead.start(m);
        }
        // Under a mask, only the allowed logits are read (where nothing
        // else reads the raw logits: the trace, a guidance model): the
        // model may skip the rest of its output head, given the mask by
        // the time its layers are done.
        let logits = match self.matcher.as_deref() {
            Some(m) if self.aux.is_none() && !self.trace.is_on() => {
                let (ahead, stats) = (&mut self.ahead, &mut self.out.stats.mask);
                model.forward_masked(batch, self.pos, &mut || {
                    ahead.wait_in_pass(m, stats);
                    Some(m.allowed().words().to_vec())
                })?
            }
            _ => model.forward(batch, self.pos)?,
        };
        self.out.stats.model_calls += 1;
        if let Some(aux) = self.aux.as_mut() {
            // At prefill the output so far is the forced start.
            aux.feed(batch, self.pos == 0, self.out.tokens.len())?;
        }
        self.pos += batch.len();
        Ok(Some(logits))
    }

    /// Samples the next token. Under a matcher the token is allowed and
    /// leaves room to finish within `max_tokens`: one that would not is
    /// redrawn from the same logits restricted to the tokens that do
    /// (rejection sampling, so exactly as if they had been masked up front).
    fn pick(&mut self, logits: &mut [f32]) -> Result<TokenId, GenerateError> {
        let remaining = self.remaining();
        let history = &self.out.tokens;
        let Some(m) = self.matcher.as_deref() else {
            if self.config.ignore_eos {
                for &e in self.vocab.eos() {
                    logits[e.as_usize()] = f32::NEG_INFINITY;
                }
            }
            return Ok(self.sampler.sample(logits, None, history)?);
        };
        // The sampler works in place: keep the logits only where a redraw
        // can happen.
        let budget = step::Budget::new(m, remaining);
        let redraw_possible = !budget.always_fits();
        if redraw_possible {
            self.original.clear();
            self.original.extend_from_slice(logits);
        }
        // A lazy automaton that hit a size limit leaves states with nothing
        // allowed: name the limit rather than an empty distribution (checked
        // only when sampling failed, off the hot path).
        let t = self
            .sampler
            .sample(logits, Some(m.allowed()), history)
            .map_err(|e| match m.index().lazy_limit_error() {
                Some(limit) if m.allowed().is_empty() => GenerateError::LimitHit { limit },
                _ => e.into(),
            })?;
        if !m.is_allowed(t) {
            // A mask shortcut (a plain level's tokens, allowed at once) may
            // have let in a token whose path a limit hit since cut off: the
            // limit is the cause, not the sampler.
            return Err(or_limit(m, GenerateError::MaskIgnored { token: t }));
        }
        if !redraw_possible || budget.fits(t) {
            return Ok(t);
        }
        self.out.stats.budget_redraws += 1;
        let viable = budget.viable(logits.len());
        if viable.is_empty() {
            return Err(GenerateError::NoViableToken { remaining });
        }
        logits.copy_from_slice(&self.original);
        Ok(self.sampler.sample(logits, Some(&viable), history)?)
    }

    /// Takes the forced continuation (jump-forward), within the budget.
    fn jump_forward(&mut self) -> Result<Vec<TokenId>, GenerateError> {
        let room = self.remaining();
        let (Some(tok), Some(m)) = (self.tokenizer, self.matcher.as_deref_mut()) else {
            return Ok(Vec::new());
        };
        let forced = m.jump_forward(tok, room)?;
        for &t in &forced {
            self.trace.forced(t, self.vocab);
            self.emit(t);
        }
        self.out.stats.forced_tokens += forced.len();
        Ok(forced)
    }

    /// Tokens left of `max_tokens`, counting the next one.
    fn remaining(&self) -> usize {
        self.config.max_tokens - self.out.tokens.len()
    }

    /// Records the step of a sampled token `t` picked from the raw
    /// `logits` under the current mask (when tracing).
    fn trace_sampled(&mut self, logits: &[f32], t: TokenId) {
        let allowed = self.matcher.as_deref().map(|m| m.allowed());
        self.trace.sampled(logits, allowed, t, self.vocab);
    }

    /// Appends a taken token to the output and hands its bytes on.
    fn emit(&mut self, t: TokenId) {
        let b = self.vocab.decode(&[t]);
        (self.on_bytes)(&b);
        self.out.bytes.extend_from_slice(&b);
        self.out.tokens.push(t);
    }
}
