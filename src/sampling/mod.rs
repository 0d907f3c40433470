//! # Sampling: logits → one token
//!
//! Every forward pass ends with one logit per vocabulary entry (151,936 for
//! Qwen); this module turns them into one token, every step, so it is exact
//! and fast at that width.
//!
//! ## The pipeline, in this order
//!
//! | # | stage | what it does | off when |
//! |---|-------|--------------|----------|
//! | 1 | mask ([`apply_mask`]) | tokens the constraint does not allow → `-inf` | no mask |
//! | 2 | logit bias ([`apply_logit_bias`]) | `logit[id] += v`; `v = -inf` forbids | empty |
//! | 3 | penalties ([`apply_penalties`]) | over the history (optionally its last N): repetition θ divides a positive logit and multiplies a negative one (CTRL, Hugging Face); then `count × λ_freq + λ_pres` is subtracted (OpenAI) | θ = 1, λ = 0 |
//! | 4 | temperature ([`apply_temperature`]) | divide by T; T = 0 is greedy | T = 1 |
//! | 5 | top-k ([`top_k`]) | keep the k best | k = 0 |
//! | 6 | top-p ([`top_p`]) | keep the smallest set, in descending probability, whose mass reaches p (at least the top token) | p = 1 |
//! | 7 | min-p ([`min_p`]) | keep `p_i >= min_p × p_max` | min_p = 0 |
//! | 8 | pick ([`greedy`], [`draw`]) | argmax, or a draw from the renormalised survivors with a seeded RNG | |
//!
//! Removal always means `-inf`. Top-p and min-p see the distribution left by
//! the stages before them (so min-p's `p_max` is the top token's probability
//! after top-k/top-p renormalisation, which only rescales it).
//!
//! ## Invariants
//!
//! * **A removed token is never picked**, greedy included: greedy is the argmax
//!   *after* the mask, bias and penalties (every filter keeps the top token, so
//!   greedy honours them all).
//! * **Ties break deterministically, lowest id first**: in top-k, at the top-p
//!   cut, in greedy.
//! * **Robust inputs**: a NaN logit counts as removed; `+inf` counts as certain
//!   (if any survive the mask and bias, the pick is uniform over them); when
//!   everything is removed the result is [`SamplingError::AllRemoved`], never a
//!   panic and never a masked token.
//! * **Randomness is injected**: the [`Sampler`] owns a seeded `StdRng` (rand
//!   0.9); the same seed and inputs give the same draws.
//!
//! ## Two ways to run it
//!
//! The stage functions ([`apply_mask`] … [`draw`]) work on a whole logits slice
//! and are what [`explain`] runs to show the distribution after each stage.
//! [`Sampler::sample`] is the per-step fast path: it never sorts the
//! vocabulary. Top-k is a selection (one scan that skips 64-wide chunks below a
//! running threshold; it runs before the division by T, which does not change
//! ranks); the remaining stages then work on the few survivors; top-p is a
//! threshold search (sort when few, else bucket by logit and sort only the
//! bucket holding the cut); and when a mask allows at most a quarter of the
//! vocabulary, only the allowed ids are visited at all (the mask's set bits,
//! [`TokenSet::words`]). Both ways share one implementation of the filters,
//! keep survivors in id order, and draw with one `f64` per step, so with the
//! same seed they pick the same token. Buffers live in the [`Sampler`] and are
//! reused: no allocation per step once warm.
//!
//! ```
//! use constrain::sampling::{Sampler, SamplingConfig};
//! use constrain::{TokenId, TokenSet};
//! let config = SamplingConfig::default().temperature(0.7).top_k(50).top_p(0.9);
//! let mut sampler = Sampler::new(config, 42)?;
//! let mut mask = TokenSet::new(4);
//! mask.insert(TokenId(1));
//! mask.insert(TokenId(3));
//! let mut logits = vec![9.0, 1.0, 8.0, 0.5];
//! let t = sampler.sample(&mut logits, Some(&mask), &[])?;
//! assert!(t == TokenId(1) || t == TokenId(3));
//! # Ok::<(), constrain::sampling::SamplingError>(())
//! ```

mod beam_tree;
mod candidates;
mod config;
mod explain;
mod fastexp;
mod guidance;
mod speculative;
mod stages;

pub use beam_tree::{
    beam_search_tree, length_normalised, BeamOutcome, BeamStep, BeamTree, Hypothesis, TreeError,
    TreeNode,
};
pub use config::{Penalties, SamplingConfig};
pub use explain::{explain, Explanation, Stage, StageProbabilities};
pub use guidance::{classifier_free_guidance, contrastive};
pub use speculative::{residual, speculation, speculative_sample, verify, Speculation, Verdict};
pub use stages::{
    apply_logit_bias, apply_mask, apply_penalties, apply_temperature, draw, greedy, min_p,
    penalise, probabilities, top_k, top_p,
};

use crate::vocab::{TokenId, TokenSet};
use candidates::Candidates;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Errors of the sampling pipeline.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SamplingError {
    /// A config value out of its range.
    #[error("invalid sampling parameter {name} = {value}: must be {allowed}")]
    InvalidParameter {
        /// The parameter's name (`temperature`, `top_p`, ...).
        name: &'static str,
        /// The value given, as text.
        value: String,
        /// The values allowed (`in [0, 1]`).
        allowed: &'static str,
    },
    /// The mask, the bias or NaN logits left no token to pick.
    #[error(
        "every token was removed (by the mask, the logit bias or NaN logits): nothing left to sample"
    )]
    AllRemoved,
    /// The mask is not over the same width as the logits.
    #[error("mask width {mask} does not match the logits width {logits}")]
    MaskWidth {
        /// The mask's width (or the second distribution's length), in
        /// tokens.
        mask: usize,
        /// The logits' length, in tokens.
        logits: usize,
    },
    /// A token id (in the history or the logit bias) outside the logits.
    #[error("token id {id} in the {what} is outside the logits width {width}")]
    TokenOutOfRange {
        /// Where the id came from (`logit_bias`, `draft`).
        what: &'static str,
        /// The offending id.
        id: TokenId,
        /// The logits' length, in tokens.
        width: usize,
    },
}

/// A mask allowing at most `width / SPARSE_DIVISOR` tokens is walked by its set
/// bits instead of being applied to the whole slice.
const SPARSE_DIVISOR: usize = 4;

enum Filtered {
    /// Greedy: the token.
    Token(TokenId),
    /// The survivors, weighted, in `Sampler::cand`.
    Candidates,
}

/// The per-step sampler: a validated [`SamplingConfig`], reusable buffers and a
/// seeded RNG. One per request (it is cheap); `Send`.
#[derive(Clone, Debug)]
pub struct Sampler {
    config: SamplingConfig,
    rng: StdRng,
    cand: Candidates,
    scratch: Vec<u32>,
    counts: Vec<(u32, u32)>,
}

impl Sampler {
    /// A sampler with `config` (validated) and an RNG seeded with `seed`.
    pub fn new(config: SamplingConfig, seed: u64) -> Result<Sampler, SamplingError> {
        Sampler::with_rng(config, StdRng::seed_from_u64(seed))
    }

    /// A sampler drawing from a given RNG.
    pub fn with_rng(config: SamplingConfig, rng: StdRng) -> Result<Sampler, SamplingError> {
        config.validate()?;
        Ok(Sampler {
            config,
            rng,
            cand: Candidates::default(),
            scratch: Vec::new(),
            counts: Vec::new(),
        })
    }

    /// The config this sampler runs.
    pub fn config(&self) -> &SamplingConfig {
        &self.config
    }

    /// Runs every stage on `logits` in place and picks a token. `mask`: allowed
    /// ids (None = all); its width must equal `logits.len()`. `history`: the
    /// tokens generated so far, for the penalties.
    ///
    /// `logits` is scratch: afterwards it holds unspecified values (with a
    /// sparse mask, only the allowed entries are even read). Errors: every token
    /// removed, a mask of the wrong width, or an id out of range in the history
    /// or the logit bias.
    pub fn sample(
        &mut self,
        logits: &mut [f32],
        mask: Option<&TokenSet>,
        history: &[TokenId],
    ) -> Result<TokenId, SamplingError> {
        match self.filter(logits, mask, history)? {
            Filtered::Token(t) => Ok(t),
            Filtered::Candidates => {
                let u: f64 = self.rng.random();
                let i = self.cand.draw(u).ok_or(SamplingError::AllRemoved)?;
                Ok(TokenId(self.cand.ids[i]))
            }
        }
    }

    /// The distribution [`sample`](Self::sample) would draw from, as
    /// `(token, probability)` in ascending id order (zero-probability survivors
    /// left out; greedy gives one token at 1). Consumes no randomness. Same
    /// arguments and errors as `sample`.
    pub fn distribution(
        &mut self,
        logits: &mut [f32],
        mask: Option<&TokenSet>,
        history: &[TokenId],
    ) -> Result<Vec<(TokenId, f32)>, SamplingError> {
        match self.filter(logits, mask, history)? {
            Filtered::Token(t) => Ok(vec![(t, 1.0)]),
            Filtered::Candidates => {
                let total = self.cand.total();
                Ok(self
                    .cand
                    .ids
                    .iter()
                    .zip(&self.cand.weights)
                    .filter(|(_, &w)| w > 0.0)
                    .map(|(&id, &w)| (TokenId(id), (w as f64 / total) as f32))
                    .collect())
            }
        }
    }

    fn filter(
        &mut self,
        logits: &mut [f32],
        mask: Option<&TokenSet>,
        history: &[TokenId],
    ) -> Result<Filtered, SamplingError> {
        let n = logits.len();
        let cfg = &self.config;
        if let Some(m) = mask {
            if m.width() != n {
                return Err(SamplingError::MaskWidth {
                    mask: m.width(),
                    logits: n,
                });
            }
        }
        if let Some(&(id, _)) = cfg.logit_bias.iter().find(|(id, _)| id.as_usize() >= n) {
            return Err(SamplingError::TokenOutOfRange {
                what: "logit_bias",
                id,
                width: n,
            });
        }
        let sparse = mask.filter(|m| m.len() <= n / SPARSE_DIVISOR);
        let pen = cfg.penalties();
        if !pen.is_off() && !history.is_empty() {
            // With a sparse mask, only tokens it allows are worth counting.
            let wanted = |t: TokenId| sparse.is_none_or(|m| m.contains(t));
            stages::count_history(
                history,
                &pen,
                n,
                wanted,
                &mut self.scratch,
                &mut self.counts,
            )?;
        } else {
            self.counts.clear();
        }
        let cand = &mut self.cand;
        if let Some(m) = sparse {
            // Only the allowed ids are ever visited.
            cand.gather_bits(logits, m.words());
            for &(id, v) in &cfg.logit_bias {
                if let Some(i) = cand.position(id.0) {
                    cand.logits[i] += v;
                }
            }
            cand.merge_apply(&self.counts, |x, c| penalise(x, c, &pen));
            cand.retain_live();
            cand.resolve_infinite();
            if cfg.is_greedy() {
                let b = cand.argmax().ok_or(SamplingError::AllRemoved)?;
                return Ok(Filtered::Token(TokenId(cand.ids[b])));
            }
            cand.top_k(cfg.top_k);
        } else {
            if let Some(m) = mask {
                apply_mask(logits, m);
            }
            for &(id, v) in &cfg.logit_bias {
                logits[id.as_usize()] += v;
            }
            for &(id, c) in &self.counts {
                let x = &mut logits[id as usize];
                *x = penalise(*x, c, &pen);
            }
            if cfg.is_greedy() {
                let b = slice_argmax(logits).ok_or(SamplingError::AllRemoved)?;
                return Ok(Filtered::Token(TokenId(b as u32)));
            }
            // Top-k is rank-based, so it runs before the division by T.
            if cfg.top_k >= 1 && cfg.top_k < n {
                cand.select_top_k_from(logits, cfg.top_k);
            } else {
                cand.gather_live(logits);
            }
            cand.resolve_infinite();
        }
        if cand.is_empty() {
            return Err(SamplingError::AllRemoved);
        }
        cand.shift_and_scale(cfg.temperature);
        cand.compute_weights();
        cand.top_p(cfg.top_p);
        cand.min_p(cfg.min_p);
        Ok(Filtered::Candidates)
    }
}

/// Position of the highest logit (lowest position on ties, `+inf` wins, NaN
/// never); `None` when all are `-inf` or NaN. One vectorised pass of block
/// maxima, then a look inside the winning block.
fn slice_argmax(logits: &[f32]) -> Option<usize> {
    const BLOCK: usize = 1024;
    const LANES: usize = 16;
    let mut best = f32::NEG_INFINITY;
    let mut best_block = None;
    for (bi, block) in logits.chunks(BLOCK).enumerate() {
        let mut acc = [f32::NEG_INFINITY; LANES];
        let parts = block.chunks_exact(LANES);
        let rest = parts.remainder();
        for part in parts {
            let part: &[f32; LANES] = part.try_into().expect("exact chunk");
            for j in 0..LANES {
                acc[j] = if part[j] > acc[j] { part[j] } else { acc[j] };
            }
        }
        let mut m = f32::NEG_INFINITY;
        for &x in acc.iter().chain(rest) {
            if x > m {
                m = x;
            }
        }
        if m > best {
            best = m;
            best_block = Some(bi);
        }
    }
    let bi = best_block?;
    let block = &logits[bi * BLOCK..logits.len().min((bi + 1) * BLOCK)];
    block
        .iter()
        .position(|&x| x == best)
        .map(|j| bi * BLOCK + j)
}
