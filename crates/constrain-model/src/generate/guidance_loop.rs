//! # Guidance in generation: a second sequence beside the model's
//!
//! Two ways of steering the distribution with a second set of logits, each
//! step, **before** the constraint mask and the sampling pipeline (the math
//! is [`constrain::sampling::classifier_free_guidance`] and
//! [`constrain::sampling::contrastive`]):
//!
//! * **Classifier-free guidance** ([`Guidance::ClassifierFree`]): a second
//!   sequence starts from the *negative prompt* and then reads the same
//!   output tokens as the model's; the logits used are
//!   `uncond + G · (cond − uncond)`. `G = 1` is plain decoding, and then the
//!   second sequence is not run at all. The second sequence needs its own KV
//!   cache, so it runs on a second instance of the model (the CLI loads the
//!   GGUF file twice).
//! * **Contrastive decoding** ([`Guidance::Contrastive`]): a smaller
//!   *amateur* model reads the same prompt and output as the *expert* (the
//!   model); the logits used are `log p_expert − log p_amateur` over the
//!   tokens whose expert probability is at least `α · max`, every other
//!   token removed. The `max` is taken over the tokens the constraint allows
//!   (and, near the end of the budget, over those that still fit it), so the
//!   expert's favourite admissible token always survives: guidance never
//!   leaves the mask with nothing. (Hugging Face's `penalty_alpha` is
//!   contrastive *search*, a different method.)
//!
//! The loop is the plain one ([`super::generate`]): the second sequence is
//! fed the same batches (prompt aside), jump-forward and the budget rule
//! apply to the guided logits unchanged.

use super::step::Budget;
use super::types::{GenerateConfig, GenerateError, Generation};
use super::{check_request, drive, Decoder};
use crate::trace::TraceStep;
use crate::LanguageModel;
use constrain::matcher::Matcher;
use constrain::sampling::{classifier_free_guidance, contrastive, SamplingError};
use constrain::vocab::{TextTokenizer, TokenId, Vocabulary};

/// How to guide generation.
pub enum Guidance<'m> {
    /// Classifier-free guidance with scale `G`.
    ClassifierFree {
        /// A second instance of the model (its own KV cache) for the
        /// unconditional sequence.
        uncond: &'m mut dyn LanguageModel,
        /// The unconditional sequence's prompt tokens; empty means the last
        /// token of the prompt alone (Hugging Face's default).
        negative_prompt: Vec<TokenId>,
        /// `G`: 1 is plain decoding (the second pass is skipped), above 1
        /// pushes away from the negative prompt.
        scale: f32,
    },
    /// Contrastive decoding with plausibility threshold `α`.
    Contrastive {
        /// The amateur model (same vocabulary and logits width).
        amateur: &'m mut dyn LanguageModel,
        /// `α` in `[0, 1]` (0.1 in Li et al.).
        alpha: f32,
    },
}

enum Kind {
    Cfg(f32),
    Contrastive(f32),
}

/// The second sequence: its model, what it starts from, and its latest
/// logits.
pub(super) struct Aux<'a> {
    model: &'a mut dyn LanguageModel,
    kind: Kind,
    prompt: Vec<TokenId>,
    pos: usize,
    logits: Option<Vec<f32>>,
}

impl Aux<'_> {
    /// Feeds the same batch as the model; `start`: the batch is the model's
    /// prefill, whose prompt is replaced by this sequence's own, and of
    /// which only the last `keep` tokens (the forced start) are read.
    pub(super) fn feed(
        &mut self,
        batch: &[TokenId],
        start: bool,
        keep: usize,
    ) -> Result<(), GenerateError> {
        let l = if start {
            let mut b = self.prompt.clone();
            b.extend_from_slice(&batch[batch.len() - keep..]);
            self.pos = b.len();
            self.model.forward(&b, 0)?
        } else {
            let l = self.model.forward(batch, self.pos)?;
            self.pos += batch.len();
            l
        };
        self.logits = Some(l);
        Ok(())
    }
}

impl Decoder<'_> {
    /// Combines the model's logits with the second sequence's (guidance on).
    pub(super) fn guide(&mut self, cond: Vec<f32>) -> Result<Vec<f32>, GenerateError> {
        let Some(aux) = self.aux.as_mut() else {
            return Ok(cond);
        };
        let other = aux
            .logits
            .take()
            .ok_or(GenerateError::Sampling(SamplingError::AllRemoved))?;
        Ok(match aux.kind {
            Kind::Cfg(g) => classifier_free_guidance(&cond, &other, g)?,
            Kind::Contrastive(alpha) => {
                let remaining = self.remaining();
                let m = self.matcher.as_deref();
                // The cutoff's max over the tokens that can be picked: the
                // allowed ones, or, where the budget rules some out, those
                // that fit.
                let viable = m
                    .map(|m| Budget::new(m, remaining))
                    .filter(|b| !b.always_fits())
                    .map(|b| b.viable(cond.len()));
                let admissible = viable.as_ref().or(m.map(|m| m.allowed()));
                contrastive(&cond, &other, alpha, admissible)?
            }
        })
    }
}

/// Generates from `prompt` like [`super::generate`], with the logits
/// steered by `guidance` at each step (see the module docs). Errors, beyond
/// [`super::generate`]'s: a second model whose logits width differs, or
/// whose context is too short; a non-finite scale; `α` outside `[0, 1]`.
#[allow(clippy::too_many_arguments)]
pub fn generate_guided<M: LanguageModel + ?Sized>(
    model: &mut M,
    vocab: &Vocabulary,
    tokenizer: Option<&TextTokenizer>,
    matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    config: &GenerateConfig,
    guidance: Guidance<'_>,
    on_bytes: &mut dyn FnMut(&[u8]),
) -> Result<Generation, GenerateError> {
    run_guided(
        model, vocab, tokenizer, matcher, prompt, config, guidance, on_bytes, false,
    )
    .map(|(g, _)| g)
}

/// [`generate_guided`], also recording one [`TraceStep`] per output token
/// ([`crate::trace`]): a sampled token's step shows the **guided** logits
/// (what the mask and the sampling pipeline saw: `uncond + G (cond −
/// uncond)`, or the contrastive scores with `-inf` for the tokens below the
/// plausibility cutoff). Same output as without the trace.
#[allow(clippy::too_many_arguments)]
pub fn generate_guided_traced<M: LanguageModel + ?Sized>(
    model: &mut M,
    vocab: &Vocabulary,
    tokenizer: Option<&TextTokenizer>,
    matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    config: &GenerateConfig,
    guidance: Guidance<'_>,
    on_bytes: &mut dyn FnMut(&[u8]),
) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
    run_guided(
        model, vocab, tokenizer, matcher, prompt, config, guidance, on_bytes, true,
    )
}

#[allow(clippy::too_many_arguments)]
fn run_guided<M: LanguageModel + ?Sized>(
    model: &mut M,
    vocab: &Vocabulary,
    tokenizer: Option<&TextTokenizer>,
    matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    config: &GenerateConfig,
    guidance: Guidance<'_>,
    on_bytes: &mut dyn FnMut(&[u8]),
    trace: bool,
) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
    check_request(model, vocab, matcher.as_deref(), prompt, config)?;
    let (other, kind, aux_prompt, role) = match guidance {
        Guidance::ClassifierFree {
            uncond,
            negative_prompt,
            scale,
        } => {
            if !scale.is_finite() {
                return Err(SamplingError::InvalidParameter {
                    name: "guidance_scale",
                    value: scale.to_string(),
                    allowed: "a finite number",
                }
                .into());
            }
            let aux_prompt = if negative_prompt.is_empty() {
                prompt[prompt.len() - 1..].to_vec()
            } else {
                negative_prompt
            };
            (uncond, Kind::Cfg(scale), aux_prompt, "unconditional")
        }
        Guidance::Contrastive { amateur, alpha } => {
            if !(0.0..=1.0).contains(&alpha) {
                return Err(SamplingError::InvalidParameter {
                    name: "contrastive_alpha",
                    value: alpha.to_string(),
                    allowed: "in [0, 1]",
                }
                .into());
            }
            (
                amateur,
                Kind::Contrastive(alpha),
                prompt.to_vec(),
                "amateur",
            )
        }
    };
    if other.logits_width() != model.logits_width() {
        return Err(GenerateError::SecondModelWidth {
            role,
            model: model.logits_width(),
            other: other.logits_width(),
        });
    }
    if aux_prompt.len() + config.max_tokens > other.context_length() {
        return Err(GenerateError::ContextTooSmall {
            prompt: aux_prompt.len(),
            max_tokens: config.max_tokens,
            context: other.context_length(),
        });
    }
    let mut d = Decoder::new(vocab, tokenizer, matcher, prompt, config, on_bytes, trace)?;
    // G = 1 is plain decoding: the second sequence is never run.
    if !matches!(kind, Kind::Cfg(g) if g == 1.0) {
        d.aux = Some(Aux {
            model: other,
            kind,
            prompt: aux_prompt,
            pos: 0,
            logits: None,
        });
    }
    drive(d, model, prompt)
}
