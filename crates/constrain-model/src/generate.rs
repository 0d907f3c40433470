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
//! ## What the sampler sees
//!
//! Penalties (`repetition_penalty`...) look at the generated tokens only, not
//! the prompt: the prompt holds the schema, whose keys the output must repeat.

use crate::trace::{self, TraceStep};
use crate::{prompt, LanguageModel, ModelError};
use constrain::index::{TokenIndex, TokenSet};
use constrain::matcher::{Matcher, MatcherError};
use constrain::sampling::{Sampler, SamplingConfig, SamplingError};
use constrain::vocab::{TextTokenizer, TokenId, VocabError, Vocabulary};
use constrain::{CompileError, Compiled, Compiler, CompilerConfig, Source};
use std::sync::Arc;

pub use constrain::schema::tools_schema;
use std::time::{Duration, Instant};

mod guidance_loop;
mod speculative_loop;

pub use guidance_loop::{generate_guided, generate_guided_traced, Guidance};
pub use speculative_loop::{
    generate_speculative, generate_speculative_traced, SpeculativeConfig, SpeculativeStats,
};

/// How to generate. Defaults are documented per field.
#[derive(Clone, Debug)]
pub struct GenerateConfig {
    /// Most tokens generated, forced tokens included (default 256).
    pub max_tokens: usize,
    /// The sampling pipeline (default: [`SamplingConfig::default`], i.e.
    /// temperature 1, no truncation).
    pub sampling: SamplingConfig,
    /// Seed of the sampler's random source (default 0).
    pub seed: u64,
    /// Append forced continuations without sampling (default `true`).
    pub jump_forward: bool,
    /// Unconstrained only: never pick EOS, so exactly `max_tokens` tokens are
    /// generated (for benchmarks; default `false`).
    pub ignore_eos: bool,
}

impl Default for GenerateConfig {
    fn default() -> Self {
        GenerateConfig {
            max_tokens: 256,
            sampling: SamplingConfig::default(),
            seed: 0,
            jump_forward: true,
            ignore_eos: false,
        }
    }
}

impl GenerateConfig {
    /// Greedy decoding with `max_tokens`.
    pub fn greedy(max_tokens: usize) -> Self {
        GenerateConfig {
            max_tokens,
            sampling: SamplingConfig::greedy(),
            ..Default::default()
        }
    }
}

/// Why generation stopped.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// The guide is finished (nothing may follow), or EOS was picked.
    Complete,
    /// `max_tokens` were generated. Under a guide the text is still complete
    /// (budget-safe completion), only the model might have continued it.
    MaxTokens,
}

/// Counters and timings of one generation.
#[derive(Clone, Debug, Default)]
pub struct GenerationStats {
    /// Prompt tokens prefilled.
    pub prompt_tokens: usize,
    /// Output tokens (sampled + forced; EOS not counted).
    pub generated_tokens: usize,
    /// Output tokens appended by jump-forward without sampling.
    pub forced_tokens: usize,
    /// Sampled tokens redrawn because they would have broken the budget.
    pub budget_redraws: usize,
    /// Forward passes of the model (prefill included).
    pub model_calls: usize,
    /// Time of the prefill pass (prompt + any forced start).
    pub prefill_time: Duration,
    /// Time from the end of prefill to the end of generation.
    pub decode_time: Duration,
    /// Speculative decoding's counters ([`generate_speculative`]); `None`
    /// otherwise.
    pub speculative: Option<SpeculativeStats>,
}

impl GenerationStats {
    /// Prompt tokens per second of prefill.
    pub fn prefill_tokens_per_sec(&self) -> f64 {
        self.prompt_tokens as f64 / self.prefill_time.as_secs_f64().max(1e-9)
    }
    /// Output tokens per second after prefill.
    pub fn decode_tokens_per_sec(&self) -> f64 {
        self.generated_tokens as f64 / self.decode_time.as_secs_f64().max(1e-9)
    }
}

/// The result of one generation.
#[derive(Clone, Debug)]
pub struct Generation {
    /// Output tokens (EOS excluded).
    pub tokens: Vec<TokenId>,
    /// Output bytes.
    pub bytes: Vec<u8>,
    pub stop: StopReason,
    /// Under a guide: whether the output is in the language (always `true`
    /// unless the guide could not bound the budget). `false` unconstrained.
    pub accepted: bool,
    pub stats: GenerationStats,
}

impl Generation {
    /// The output as text (replacement characters for invalid UTF-8, which a
    /// guide over a UTF-8 language never produces).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Why generation failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("max_tokens {max_tokens} is too small: the constraint needs at least {needed} tokens")]
    BudgetTooSmall { max_tokens: usize, needed: u32 },
    #[error("the prompt is empty")]
    EmptyPrompt,
    #[error("the prompt has {prompt} tokens but the model's context is {context} tokens")]
    PromptTooLong { prompt: usize, context: usize },
    #[error("prompt ({prompt} tokens) + max_tokens ({max_tokens}) exceeds the model's context of {context} tokens; lower max_tokens to at most {}", context.saturating_sub(*prompt))]
    ContextTooSmall {
        prompt: usize,
        max_tokens: usize,
        context: usize,
    },
    #[error("the model has {model} logits but the vocabulary has {vocab}")]
    WidthMismatch { model: usize, vocab: usize },
    #[error("the {role} model has {other} logits but the model has {model}: it must share the model's vocabulary")]
    SecondModelWidth {
        role: &'static str,
        model: usize,
        other: usize,
    },
    #[error("invalid draft_tokens 0: the draft must propose at least 1 token per step")]
    ZeroDraftTokens,
    #[error("the matcher's rollback window is {window} tokens but draft_tokens is {draft_tokens}: speculative decoding rolls back up to draft_tokens tokens (Matcher::with_max_rollback)")]
    RollbackWindow { window: usize, draft_tokens: usize },
    #[error("the sampler picked token {token}, which the guide forbids")]
    MaskIgnored { token: TokenId },
    #[error("the constraint's automaton hit a resource limit while generating: {limit}")]
    LimitHit { limit: String },
    #[error("no token keeps the output completable within the {remaining} tokens left")]
    NoViableToken { remaining: usize },
    #[error("the model's output does not deserialize: {0}")]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Matcher(#[from] MatcherError),
    #[error(transparent)]
    Sampling(#[from] SamplingError),
    #[error(transparent)]
    Vocab(#[from] VocabError),
    #[error(transparent)]
    Index(#[from] constrain::Error),
    #[error(transparent)]
    Compile(#[from] CompileError),
    #[error(transparent)]
    Beam(#[from] crate::beam::BeamError),
}

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
    /// The steps so far when tracing.
    trace: Option<Vec<TraceStep>>,
    /// The second sequence of guidance (classifier-free or contrastive),
    /// fed alongside the model's.
    aux: Option<guidance_loop::Aux<'a>>,
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
            trace: trace.then(Vec::new),
            aux: None,
        })
    }

    /// The result, once the loop is over.
    fn finish(mut self) -> (Generation, Vec<TraceStep>) {
        self.out.stats.generated_tokens = self.out.tokens.len();
        self.out.accepted = self.matcher.as_deref().is_some_and(|m| m.is_accepting());
        (self.out, self.trace.unwrap_or_default())
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
        if self.aux.is_some() {
            logits = self.guide(logits)?;
        }
        // The sampler works in place: the trace reads a copy of the raw logits.
        let raw = self.trace.as_ref().map(|_| logits.clone());
        let t = self.pick(&mut logits)?;
        if let (Some(raw), Some(steps)) = (raw, self.trace.as_mut()) {
            let allowed = self.matcher.as_deref().map(|m| m.allowed());
            steps.push(trace::sampled_step(
                steps.len(),
                &raw,
                allowed,
                t,
                self.vocab,
            ));
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
            m.advance(t)?;
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
        let logits = model.forward(batch, self.pos)?;
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
        let remaining = self.config.max_tokens - self.out.tokens.len();
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
        let redraw_possible = !m.always_fits(remaining);
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
            return Err(GenerateError::MaskIgnored { token: t });
        }
        if !redraw_possible || m.fits(t, remaining) {
            return Ok(t);
        }
        self.out.stats.budget_redraws += 1;
        let mut viable = TokenSet::new(logits.len());
        for u in m.allowed().iter().filter(|&u| m.fits(u, remaining)) {
            viable.insert(u);
        }
        if viable.is_empty() {
            return Err(GenerateError::NoViableToken { remaining });
        }
        logits.copy_from_slice(&self.original);
        Ok(self.sampler.sample(logits, Some(&viable), history)?)
    }

    /// Takes the forced continuation (jump-forward), within the budget.
    fn jump_forward(&mut self) -> Result<Vec<TokenId>, GenerateError> {
        let (Some(tok), Some(m)) = (self.tokenizer, self.matcher.as_deref_mut()) else {
            return Ok(Vec::new());
        };
        let room = self.config.max_tokens - self.out.tokens.len();
        let forced = m.jump_forward(tok, room)?;
        for &t in &forced {
            if let Some(steps) = self.trace.as_mut() {
                steps.push(trace::forced_step(steps.len(), t, self.vocab));
            }
            self.emit(t);
        }
        self.out.stats.forced_tokens += forced.len();
        Ok(forced)
    }

    /// Appends a taken token to the output and hands its bytes on.
    fn emit(&mut self, t: TokenId) {
        let b = self.vocab.decode(&[t]);
        (self.on_bytes)(&b);
        self.out.bytes.extend_from_slice(&b);
        self.out.tokens.push(t);
    }
}

/// A model with its tokenizer and vocabulary: the library's one-stop entry.
///
/// ```
/// use constrain_model::generate::{Engine, GenerateConfig};
/// use constrain_testkit::{tiny, FakeModel};
///
/// // Offline: the tiny test vocabulary and a model with flat logits.
/// let tok = tiny::tokenizer()?;
/// let width = tok.vocab.logits_width();
/// let mut engine = Engine::new(FakeModel::uniform(width), tok.tokenizer, tok.vocab)?;
/// let index = engine.regex_index(r#"\{"ok":(true|false)\}"#)?;
/// let prompt = engine.prompt_tokens("Is it ok?", None, false)?;
/// let out = engine.generate(&prompt, Some(index), &GenerateConfig::default(), &mut |_| {})?;
/// assert!(out.text() == r#"{"ok":true}"# || out.text() == r#"{"ok":false}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Engine<M: LanguageModel> {
    model: M,
    tokenizer: TextTokenizer,
    vocab: Arc<Vocabulary>,
    compiler: Compiler,
}

impl Engine<crate::QwenModel> {
    /// Loads a GGUF model and its tokenizer (see [`crate::load`]).
    pub fn load(
        path: impl AsRef<std::path::Path>,
        tokenizer: &crate::TokenizerSource,
    ) -> Result<Self, GenerateError> {
        let l = crate::load(path, tokenizer)?;
        Ok(Engine {
            compiler: Compiler::new(l.vocab.clone(), CompilerConfig::default()),
            model: l.model,
            tokenizer: l.tokenizer,
            vocab: l.vocab,
        })
    }
}

impl<M: LanguageModel> Engine<M> {
    /// Puts the pieces together; the vocabulary is widened to the model's
    /// logits width (an error when the tokenizer has more ids than logits).
    pub fn new(
        model: M,
        tokenizer: TextTokenizer,
        vocab: impl Into<Arc<Vocabulary>>,
    ) -> Result<Self, GenerateError> {
        let vocab: Arc<Vocabulary> = vocab.into();
        let width = model.logits_width();
        let vocab = if vocab.logits_width() == width {
            vocab
        } else {
            Arc::new(crate::check_compatible((*vocab).clone(), width)?)
        };
        Ok(Engine {
            compiler: Compiler::new(vocab.clone(), CompilerConfig::default()),
            model,
            tokenizer,
            vocab,
        })
    }

    /// The same engine compiling with `config` (limits, lazy threshold,
    /// cache size).
    pub fn with_compiler_config(mut self, config: CompilerConfig) -> Self {
        self.compiler = Compiler::new(self.vocab.clone(), config);
        self
    }

    /// The compiler (over this engine's vocabulary, with its cache).
    pub fn compiler(&self) -> &Compiler {
        &self.compiler
    }

    /// Compiles a constraint over this engine's vocabulary (cached).
    pub fn compile(&self, source: &Source) -> Result<Arc<Compiled>, GenerateError> {
        Ok(self.compiler.compile(source)?)
    }

    /// The model.
    pub fn model(&mut self) -> &mut M {
        &mut self.model
    }

    /// The vocabulary (logits width = the model's).
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The text tokenizer.
    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// The token index of a regex over this vocabulary.
    pub fn regex_index(&self, regex: &str) -> Result<Arc<TokenIndex>, GenerateError> {
        Ok(self.compile(&Source::regex(regex))?.index().clone())
    }

    /// The token index of a JSON Schema (default options); returns the
    /// compiler's warnings too.
    pub fn schema_index(
        &self,
        schema: &serde_json::Value,
    ) -> Result<(Arc<TokenIndex>, Vec<String>), GenerateError> {
        let c = self.compile(&Source::json_schema(schema.clone()))?;
        let warnings = c.warnings().iter().map(|w| w.to_string()).collect();
        Ok((c.index().clone(), warnings))
    }

    /// Tokenizes a prompt: ChatML with `system` (Qwen's default persona when
    /// `None`) and `user` turns, or `user` as is when `raw`.
    pub fn prompt_tokens(
        &self,
        user: &str,
        system: Option<&str>,
        raw: bool,
    ) -> Result<Vec<TokenId>, GenerateError> {
        let text = if raw {
            user.to_string()
        } else {
            prompt::chatml(&[
                prompt::Message::system(system.unwrap_or(prompt::QWEN_DEFAULT_SYSTEM)),
                prompt::Message::user(user),
            ])
        };
        Ok(self.tokenizer.encode(&text)?)
    }

    /// Generates from prompt tokens, constrained by `index` when given.
    pub fn generate(
        &mut self,
        prompt: &[TokenId],
        index: Option<Arc<TokenIndex>>,
        config: &GenerateConfig,
        on_bytes: &mut dyn FnMut(&[u8]),
    ) -> Result<Generation, GenerateError> {
        let mut guide = index.map(Matcher::from_index);
        generate(
            &mut self.model,
            &self.vocab,
            Some(&self.tokenizer),
            guide.as_mut(),
            prompt,
            config,
            on_bytes,
        )
    }

    /// [`Engine::generate`], also recording the step trace (see
    /// [`crate::trace`]); the output is the same as without it.
    pub fn generate_traced(
        &mut self,
        prompt: &[TokenId],
        index: Option<Arc<TokenIndex>>,
        config: &GenerateConfig,
        on_bytes: &mut dyn FnMut(&[u8]),
    ) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
        let mut guide = index.map(Matcher::from_index);
        generate_traced(
            &mut self.model,
            &self.vocab,
            Some(&self.tokenizer),
            guide.as_mut(),
            prompt,
            config,
            on_bytes,
        )
    }

    /// Speculative decoding from prompt tokens, constrained by `index` when
    /// given: `draft` proposes, this engine's model verifies (see
    /// [`generate_speculative`]).
    pub fn generate_speculative<D: LanguageModel + ?Sized>(
        &mut self,
        draft: &mut D,
        prompt: &[TokenId],
        index: Option<Arc<TokenIndex>>,
        config: &GenerateConfig,
        spec: &SpeculativeConfig,
        on_bytes: &mut dyn FnMut(&[u8]),
    ) -> Result<Generation, GenerateError> {
        // The rollback window speculative decoding needs, and no more.
        let mut guide = index.map(|i| Matcher::from_index(i).with_max_rollback(spec.draft_tokens));
        generate_speculative(
            &mut self.model,
            draft,
            &self.vocab,
            Some(&self.tokenizer),
            guide.as_mut(),
            prompt,
            config,
            spec,
            on_bytes,
        )
    }

    /// [`Engine::generate_speculative`], also recording the step trace of
    /// the target's distribution (see [`generate_speculative_traced`]).
    pub fn generate_speculative_traced<D: LanguageModel + ?Sized>(
        &mut self,
        draft: &mut D,
        prompt: &[TokenId],
        index: Option<Arc<TokenIndex>>,
        config: &GenerateConfig,
        spec: &SpeculativeConfig,
        on_bytes: &mut dyn FnMut(&[u8]),
    ) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
        let mut guide = index.map(|i| Matcher::from_index(i).with_max_rollback(spec.draft_tokens));
        generate_speculative_traced(
            &mut self.model,
            draft,
            &self.vocab,
            Some(&self.tokenizer),
            guide.as_mut(),
            prompt,
            config,
            spec,
            on_bytes,
        )
    }

    /// [`Engine::generate_guided`], also recording the step trace of the
    /// guided distribution (see [`generate_guided_traced`]).
    pub fn generate_guided_traced(
        &mut self,
        prompt: &[TokenId],
        index: Option<Arc<TokenIndex>>,
        config: &GenerateConfig,
        guidance: Guidance<'_>,
        on_bytes: &mut dyn FnMut(&[u8]),
    ) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
        let mut guide = index.map(Matcher::from_index);
        generate_guided_traced(
            &mut self.model,
            &self.vocab,
            Some(&self.tokenizer),
            guide.as_mut(),
            prompt,
            config,
            guidance,
            on_bytes,
        )
    }

    /// Generation steered by classifier-free guidance or contrastive
    /// decoding (see [`generate_guided`]).
    pub fn generate_guided(
        &mut self,
        prompt: &[TokenId],
        index: Option<Arc<TokenIndex>>,
        config: &GenerateConfig,
        guidance: Guidance<'_>,
        on_bytes: &mut dyn FnMut(&[u8]),
    ) -> Result<Generation, GenerateError> {
        let mut guide = index.map(Matcher::from_index);
        generate_guided(
            &mut self.model,
            &self.vocab,
            Some(&self.tokenizer),
            guide.as_mut(),
            prompt,
            config,
            guidance,
            on_bytes,
        )
    }

    /// Constrained beam search from prompt tokens under `index` (see
    /// [`crate::beam`]).
    pub fn beam_search(
        &mut self,
        prompt: &[TokenId],
        index: Arc<TokenIndex>,
        config: &crate::beam::BeamConfig,
    ) -> Result<crate::beam::BeamGeneration, GenerateError> {
        let guide = Matcher::from_index(index);
        crate::beam::beam_search(
            &mut self.model,
            &self.vocab,
            Some(&self.tokenizer),
            &guide,
            prompt,
            config,
        )
    }

    /// Generates one JSON value valid for `schema`, answering `user` (the
    /// system message shows the schema).
    pub fn generate_json(
        &mut self,
        schema: &serde_json::Value,
        user: &str,
        config: &GenerateConfig,
    ) -> Result<serde_json::Value, GenerateError> {
        let (index, _warnings) = self.schema_index(schema)?;
        let system = prompt::schema_system_message(schema);
        let p = self.prompt_tokens(user, Some(&system), false)?;
        let out = self.generate(&p, Some(index), config, &mut |_| {})?;
        Ok(serde_json::from_slice(&out.bytes)?)
    }

    /// Generates a `T` whose JSON Schema is derived by `schemars`.
    ///
    /// ```
    /// use constrain_model::generate::{Engine, GenerateConfig};
    /// use constrain_testkit::{tiny, FakeModel};
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Verdict {
    ///     ok: bool,
    ///     score: u8,
    /// }
    ///
    /// // Offline: the tiny test vocabulary and a model with flat logits.
    /// let tok = tiny::tokenizer()?;
    /// let model = FakeModel::uniform(tok.vocab.logits_width());
    /// let mut engine = Engine::new(model, tok.tokenizer, tok.vocab)?;
    /// let v: Verdict = engine.generate_typed("Is it ok?", &GenerateConfig::greedy(40))?;
    /// assert!(v.score <= u8::MAX);
    /// # let _ = v.ok;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn generate_typed<T>(
        &mut self,
        user: &str,
        config: &GenerateConfig,
    ) -> Result<T, GenerateError>
    where
        T: schemars::JsonSchema + serde::de::DeserializeOwned,
    {
        let mut schema = constrain::schema::schema_for_type::<T>();
        strip_numeric_formats(&mut schema);
        let v = self.generate_json(&schema, user, config)?;
        Ok(serde_json::from_value(v)?)
    }
}

/// Replaces the `format` annotations schemars puts on Rust numeric types
/// (`"int32"`, `"uint8"`, `"double"`...), which are not JSON Schema formats,
/// by the ranges they stand for (`minimum` / `maximum`, kept when schemars
/// already gives tighter ones), so that the value always fits the Rust type.
fn strip_numeric_formats(v: &mut serde_json::Value) {
    use serde_json::json;
    let range = |f: &str| -> Option<(serde_json::Value, serde_json::Value)> {
        Some(match f {
            "int8" => (json!(i8::MIN), json!(i8::MAX)),
            "int16" => (json!(i16::MIN), json!(i16::MAX)),
            "int32" | "int" => (json!(i32::MIN), json!(i32::MAX)),
            "int64" => (json!(i64::MIN), json!(i64::MAX)),
            "uint8" => (json!(0), json!(u8::MAX)),
            "uint16" => (json!(0), json!(u16::MAX)),
            "uint32" | "uint" => (json!(0), json!(u32::MAX)),
            "uint64" => (json!(0), json!(u64::MAX)),
            _ => return None,
        })
    };
    match v {
        serde_json::Value::Object(m) => {
            let numeric_type = match m.get("type") {
                Some(serde_json::Value::String(t)) => t == "integer" || t == "number",
                Some(serde_json::Value::Array(ts)) => {
                    ts.iter().any(|t| t == "integer" || t == "number")
                }
                _ => false,
            };
            let format = m.get("format").and_then(|f| f.as_str()).map(str::to_string);
            if let (true, Some(f)) = (numeric_type, format) {
                if let Some((lo, hi)) = range(&f) {
                    m.entry("minimum").or_insert(lo);
                    m.entry("maximum").or_insert(hi);
                    m.remove("format");
                } else if matches!(f.as_str(), "float" | "double" | "int128" | "uint128") {
                    m.remove("format");
                }
            }
            for (_, x) in m.iter_mut() {
                strip_numeric_formats(x);
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_numeric_formats),
        _ => {}
    }
}
