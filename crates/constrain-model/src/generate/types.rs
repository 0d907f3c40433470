//! The values every generation loop shares: what to generate
//! ([`GenerateConfig`]), what came out ([`Generation`], [`StopReason`],
//! [`GenerationStats`] with the speculative loop's [`SpeculativeStats`]) and
//! why it failed ([`GenerateError`], with beam search's own refusals,
//! [`BeamError`]). The plain, guided, speculative and beam loops all import
//! them from here; none of them imports another loop for its types.

use crate::ModelError;
use constrain::matcher::MatcherError;
use constrain::sampling::{SamplingConfig, SamplingError};
use constrain::vocab::{TokenId, VocabError};
use constrain::CompileError;
use std::time::Duration;

/// How to generate. Defaults are documented per field.
#[derive(Clone, Debug)]
#[non_exhaustive]
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
    /// Compute each step's mask while the model's pass for the previous
    /// token runs, on a worker thread (default `true`; the output is the
    /// same either way: see [`MaskStats`]). The plain and guided loops use
    /// it; speculative decoding and beam search compute masks at the step.
    pub mask_overlap: bool,
}

constrain::config_setters!(GenerateConfig {
    max_tokens: usize,
    sampling: SamplingConfig,
    seed: u64,
    jump_forward: bool,
    ignore_eos: bool,
    mask_overlap: bool,
});

impl Default for GenerateConfig {
    fn default() -> Self {
        GenerateConfig {
            max_tokens: 256,
            sampling: SamplingConfig::default(),
            seed: 0,
            jump_forward: true,
            ignore_eos: false,
            mask_overlap: true,
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
    /// How long the sampled steps waited for their masks.
    pub mask: MaskStats,
    /// Speculative decoding's counters ([`generate_speculative`](super::generate_speculative)); `None`
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

/// How long the steps of one generation waited for their masks.
///
/// A masked step is one that samples under a constraint. With
/// [`GenerateConfig::mask_overlap`], its mask is computed while the model's
/// pass runs, and the step *waited* when that had not finished by the time
/// the logits arrived; without it, every masked step waits for its mask's
/// whole computation (a lookup for a state seen before, a walk of the token
/// trie on a lazy index's first visit).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MaskStats {
    /// Masked steps (sampled under a constraint; forced tokens have none).
    pub steps: usize,
    /// Of them, the steps whose mask was not ready when their logits were.
    pub waited: usize,
    /// Time from the logits' arrival to the mask in hand, summed over the
    /// masked steps (a step whose mask was ready adds the lookup only).
    pub wait_time: Duration,
    /// The longest of those times.
    pub max_wait: Duration,
}

impl MaskStats {
    /// `waited / steps` (0 without masked steps).
    pub fn waited_share(&self) -> f64 {
        self.waited as f64 / self.steps.max(1) as f64
    }
}

/// The result of one generation.
#[derive(Clone, Debug)]
pub struct Generation {
    /// Output tokens (EOS excluded).
    pub tokens: Vec<TokenId>,
    /// Output bytes.
    pub bytes: Vec<u8>,
    /// Why generation stopped.
    pub stop: StopReason,
    /// Under a guide: whether the output is in the language (always `true`
    /// unless the guide could not bound the budget). `false` unconstrained.
    pub accepted: bool,
    /// Token counts and timings of this generation.
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
    /// The constraint cannot be satisfied within `max_tokens`.
    #[error("max_tokens {max_tokens} is too small: the constraint needs at least {needed} tokens")]
    BudgetTooSmall {
        /// The configured token budget.
        max_tokens: usize,
        /// The fewest tokens that reach an accepting state of the constraint.
        needed: u32,
    },
    /// The prompt has no tokens.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// The prompt alone does not fit in the model's context.
    #[error("the prompt has {prompt} tokens but the model's context is {context} tokens")]
    PromptTooLong {
        /// Prompt length in tokens.
        prompt: usize,
        /// The model's context length in tokens.
        context: usize,
    },
    /// The prompt plus `max_tokens` does not fit in the model's context.
    #[error("prompt ({prompt} tokens) + max_tokens ({max_tokens}) exceeds the model's context of {context} tokens; lower max_tokens to at most {}", context.saturating_sub(*prompt))]
    ContextTooSmall {
        /// Prompt length in tokens.
        prompt: usize,
        /// The configured token budget.
        max_tokens: usize,
        /// The model's context length in tokens.
        context: usize,
    },
    /// The model's logits width differs from the vocabulary's.
    #[error("the model has {model} logits but the vocabulary has {vocab}")]
    WidthMismatch {
        /// The model's logits width.
        model: usize,
        /// The vocabulary's logits width.
        vocab: usize,
    },
    /// A second model (speculative draft, guidance model) has a different
    /// logits width from the main model.
    #[error("the {role} model has {other} logits but the model has {model}: it must share the model's vocabulary")]
    SecondModelWidth {
        /// What the second model is for: `"draft"`, `"unconditional"` or
        /// `"amateur"`.
        role: &'static str,
        /// The main model's logits width.
        model: usize,
        /// The second model's logits width.
        other: usize,
    },
    /// Speculative decoding was configured with `draft_tokens` 0.
    #[error("invalid draft_tokens 0: the draft must propose at least 1 token per step")]
    ZeroDraftTokens,
    /// The matcher cannot roll back as many tokens as the draft may propose.
    #[error("the matcher's rollback window is {window} tokens but draft_tokens is {draft_tokens}: speculative decoding rolls back up to draft_tokens tokens (Matcher::with_max_rollback)")]
    RollbackWindow {
        /// The matcher's rollback window in tokens.
        window: usize,
        /// The configured number of draft tokens per step.
        draft_tokens: usize,
    },
    /// The sampler returned a token that the guide's mask forbids.
    #[error("the sampler picked token {token}, which the guide forbids")]
    MaskIgnored {
        /// The forbidden token that was picked.
        token: TokenId,
    },
    /// A lazily built automaton reached a size limit, leaving no token allowed.
    #[error("the constraint's automaton hit a resource limit while generating: {limit}")]
    LimitHit {
        /// The limit that was reached.
        limit: constrain::index::LimitHit,
    },
    /// No allowed token leaves the output completable within the budget left.
    #[error("no token keeps the output completable within the {remaining} tokens left")]
    NoViableToken {
        /// Tokens left in the budget.
        remaining: usize,
    },
    /// The generated text could not be deserialized into the requested type.
    #[error("the model's output does not deserialize: {0}")]
    Json(#[from] serde_json::Error),
    /// The model failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The matcher failed.
    #[error(transparent)]
    Matcher(#[from] MatcherError),
    /// The sampler's parameters are invalid or sampling failed.
    #[error(transparent)]
    Sampling(#[from] SamplingError),
    /// The vocabulary is unusable.
    #[error(transparent)]
    Vocab(#[from] VocabError),
    /// Building or querying the constraint's index failed.
    #[error(transparent)]
    Index(#[from] constrain::Error),
    /// The constraint did not compile.
    #[error(transparent)]
    Compile(#[from] CompileError),
    /// The beam search parameters are invalid.
    #[error(transparent)]
    Beam(#[from] BeamError),
}

/// Counters of speculative decoding.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpeculativeStats {
    /// Verification rounds (one target pass each, at most) that verified at
    /// least one draft token.
    pub rounds: usize,
    /// Rounds where the adaptive schedule drafted nothing: one plain target
    /// step each.
    pub plain_steps: usize,
    /// Tokens the draft proposed.
    pub drafted: usize,
    /// Proposals the target kept.
    pub accepted: usize,
    /// Forward passes of the draft model (its prompt prefill not counted).
    pub draft_calls: usize,
    /// Positions the target scored in its verification passes (the tokens
    /// it had not read yet plus the proposals).
    pub target_positions: usize,
    /// Time of the draft's prompt prefill (part of the generation's
    /// `prefill_time`).
    pub draft_prefill_time: Duration,
    /// Time spent drafting (the draft's passes, masks, sampling).
    pub draft_time: Duration,
    /// Of `draft_time`, inside the draft model's forward passes.
    pub draft_model_time: Duration,
    /// Time spent verifying (the target's passes and the acceptance tests).
    pub verify_time: Duration,
    /// Of `verify_time`, inside the target model's forward passes.
    pub target_model_time: Duration,
}

impl SpeculativeStats {
    /// `accepted / drafted` (0 when nothing was drafted).
    pub fn acceptance_rate(&self) -> f64 {
        self.accepted as f64 / (self.drafted.max(1)) as f64
    }

    /// Draft tokens kept per verification round, `accepted / rounds`.
    pub fn mean_accepted_length(&self) -> f64 {
        self.accepted as f64 / (self.rounds.max(1)) as f64
    }

    /// Mean time of one draft forward pass.
    pub fn draft_pass_time(&self) -> Duration {
        self.draft_model_time / (self.draft_calls.max(1) as u32)
    }

    /// Time outside the models' passes: masks, matcher, sampling,
    /// acceptance tests, bookkeeping.
    pub fn overhead_time(&self) -> Duration {
        (self.draft_time + self.verify_time)
            .saturating_sub(self.draft_model_time + self.target_model_time)
    }
}

/// Why beam search was refused, beyond [`GenerateError`].
#[derive(Debug, thiserror::Error)]
pub enum BeamError {
    /// A beam width of 0 was requested.
    #[error("invalid beam width 0: the beam width must be at least 1")]
    ZeroBeams,
    /// The length penalty is NaN or infinite.
    #[error("invalid length penalty {0}: must be a finite number")]
    LengthPenalty(f32),
}
