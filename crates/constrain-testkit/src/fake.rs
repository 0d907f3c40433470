//! A scripted [`LanguageModel`] for tests and offline examples.

use constrain::vocab::TokenId;
use constrain_model::{LanguageModel, ModelError, Wanted};
use rand::{rngs::StdRng, Rng, SeedableRng};

type LogitsFn = dyn FnMut(&[TokenId]) -> Vec<f32> + Send;

/// FNV-1a over the token ids of `seq`, from `salt`: the seed of
/// [`hashed_logits`], and of any scripted choice that must depend on the
/// whole sequence.
pub fn sequence_hash(seq: &[TokenId], salt: u64) -> u64 {
    seq.iter().fold(salt ^ 1469598103934665603, |h, t| {
        (h ^ t.0 as u64).wrapping_mul(1099511628211)
    })
}

/// `width` logits uniform in [-4, 4), seeded by [`sequence_hash`]`(seq, salt)`.
pub fn hashed_logits(
    width: usize,
    salt: u64,
) -> impl Fn(&[TokenId]) -> Vec<f32> + Send + Sync + Clone + 'static {
    move |seq: &[TokenId]| {
        let mut rng = StdRng::seed_from_u64(sequence_hash(seq, salt));
        (0..width).map(|_| rng.random_range(-4.0f32..4.0)).collect()
    }
}

/// A model whose logits are computed by a closure over the whole sequence fed
/// so far (prompt and output). It follows the [`LanguageModel`] contract
/// exactly (positions, context length, widths), so the generation loop cannot
/// tell it from a real model, and it counts its forward passes.
///
/// ```
/// use constrain_model::LanguageModel;
/// use constrain_testkit::FakeModel;
/// use constrain::TokenId;
/// // Always prefers token 3.
/// let mut m = FakeModel::new(8, |_seq| {
///     let mut l = vec![0.0; 8];
///     l[3] = 5.0;
///     l
/// });
/// let logits = m.forward(&[TokenId(1), TokenId(2)], 0)?;
/// assert_eq!(logits.len(), 8);
/// assert_eq!(m.calls(), 1);
/// # Ok::<(), constrain_model::ModelError>(())
/// ```
pub struct FakeModel {
    width: usize,
    context: usize,
    seq: Vec<TokenId>,
    logits: Box<LogitsFn>,
    calls: usize,
    /// `forward_masked` leaves every logit its mask leaves out at `-inf`.
    strict_masks: bool,
    masks: usize,
}

impl FakeModel {
    /// A model of `width` logits whose output is `logits(sequence so far)`.
    pub fn new(width: usize, logits: impl FnMut(&[TokenId]) -> Vec<f32> + Send + 'static) -> Self {
        FakeModel {
            width,
            context: 1 << 20,
            seq: Vec::new(),
            logits: Box::new(logits),
            calls: 0,
            strict_masks: false,
            masks: 0,
        }
    }

    /// A model whose logits are pseudo-random but a function of the
    /// sequence ([`hashed_logits`]): the same sequence always gets the same
    /// logits, as from a real model.
    pub fn random(width: usize, salt: u64) -> Self {
        Self::new(width, hashed_logits(width, salt))
    }

    /// A model that returns equal logits everywhere.
    pub fn uniform(width: usize) -> Self {
        Self::new(width, move |_| vec![0.0; width])
    }

    /// The same model with another context length (default 2^20).
    pub fn with_context_length(mut self, context: usize) -> Self {
        self.context = context;
        self
    }

    /// Number of forward passes so far.
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// The same model taking `forward_masked` to the letter: every logit
    /// the caller's mask leaves out is `-inf` (a model that computes only
    /// the wanted logits, as constrain's Qwen narrows its output head). By
    /// default the mask is not asked for and every logit is computed.
    pub fn with_strict_masks(mut self) -> Self {
        self.strict_masks = true;
        self
    }

    /// Number of masks `forward_masked` was given (with strict masks).
    pub fn masks(&self) -> usize {
        self.masks
    }

    /// The sequence fed since the last start.
    pub fn sequence(&self) -> &[TokenId] {
        &self.seq
    }
}

impl LanguageModel for FakeModel {
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::EmptyBatch);
        }
        if pos != 0 && pos != self.seq.len() {
            return Err(ModelError::Position {
                expected: self.seq.len(),
                got: pos,
            });
        }
        if pos + tokens.len() > self.context {
            return Err(ModelError::ContextOverflow {
                needed: pos + tokens.len(),
                context: self.context,
            });
        }
        if let Some(&t) = tokens.iter().find(|t| t.as_usize() >= self.width) {
            return Err(ModelError::TokenOutOfRange {
                token: t,
                width: self.width,
            });
        }
        if pos == 0 {
            self.seq.clear();
        }
        self.seq.extend_from_slice(tokens);
        self.calls += 1;
        let mut l = (self.logits)(&self.seq);
        l.resize(self.width, f32::NEG_INFINITY);
        Ok(l)
    }

    fn forward_masked(
        &mut self,
        tokens: &[TokenId],
        pos: usize,
        wanted: Wanted<'_>,
    ) -> Result<Vec<f32>, ModelError> {
        let mut l = self.forward(tokens, pos)?;
        if self.strict_masks {
            if let Some(words) = wanted() {
                self.masks += 1;
                for (i, x) in l.iter_mut().enumerate() {
                    if words.get(i / 64).is_none_or(|w| (w >> (i % 64)) & 1 == 0) {
                        *x = f32::NEG_INFINITY;
                    }
                }
            }
        }
        Ok(l)
    }

    fn reset(&mut self) {
        self.seq.clear();
    }

    fn logits_width(&self) -> usize {
        self.width
    }

    fn context_length(&self) -> usize {
        self.context
    }

    /// Rewinds to the first `len` tokens (the logits closure sees the
    /// sequence, so this is exact).
    fn truncate(&mut self, len: usize) -> bool {
        if len == 0 || len > self.seq.len() {
            return false;
        }
        self.seq.truncate(len);
        true
    }
}
