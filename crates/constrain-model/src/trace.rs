//! # Step trace: what the model wanted, what the constraint allowed
//!
//! [`generate_traced`](crate::generate::generate_traced) (and the traced
//! variant of every other loop) records one [`TraceStep`] per output token,
//! without changing what is generated (the trace reads the logits before
//! the sampler touches them and draws nothing from the random source). `constrain --trace FILE` writes the steps inside
//! a [`Trace`] (`model`, `prompt`, `settings`, `steps`, `sequence_logprob`);
//! `constrain view` turns that file into a page ([`crate::inspector`]).
//!
//! Per step:
//!
//! * `step`: the position in the output, from 0 (an EOS pick is a step too);
//! * `token`: `{id, text, bytes, logit}`, the raw logit of the chosen token
//!   (`null` for a forced token, which no logits were computed for);
//! * `forced`: taken by jump-forward without sampling: `top` is empty and
//!   `logprob` is 0 (the constraint left no choice; under beam search, see
//!   below);
//! * `logprob`: the chosen token's natural log-probability under the *masked*
//!   distribution at temperature 1 (`logit − logsumexp(allowed logits)`),
//!   whatever the sampling settings were: the model's own belief once the
//!   constraint is applied;
//! * `allowed_count`: how many tokens the constraint allowed (the whole
//!   vocabulary when unconstrained; 1 for a forced token);
//! * `allowed_mass`: as the issue defines it, **the probability the
//!   constraint removed**, `1 − Σ_{allowed} softmax(raw logits)`: 0 when the
//!   model already put all its mass on allowed tokens, near 1 when the
//!   constraint overrode it (`null` for a forced token);
//! * `top`: the [`TOP_LOGITS`] highest raw logits, best first (lowest id on
//!   ties), each `{id, text, logit, allowed}`.
//!
//! `sequence_logprob` is the sum of the steps' `logprob`s.
//!
//! A beam search's trace ([`beam_search_traced`](crate::generate::beam_search_traced))
//! is the winning hypothesis's, with two more fields: `score`
//! (`sequence_logprob / steps^length_penalty`, the number the search ranked
//! it by) and `length_penalty`. Its steps' `logprob`s are the ones the search
//! scored, forced steps included: beam search scores greedy's forced tokens
//! too, so there a forced step's `logprob` is that score rather than 0.
//!
//! The cost is two passes over the logits per step (the max, then the
//! masked and unmasked sums of `exp` in f32, together) and a top-16
//! selection, plus a copy of them: `cargo bench -p constrain-model --bench
//! trace` measures it against a decode step (`docs/decoding.md`, "Step
//! trace").

use constrain::index::TokenSet;
use constrain::vocab::{TokenId, Vocabulary};
use serde::{Deserialize, Serialize};

/// How many raw logits each step keeps.
pub const TOP_LOGITS: usize = 16;

/// The chosen token of a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceToken {
    /// The token id.
    pub id: u32,
    /// The token's text (lossy UTF-8 of its bytes; a special token's name).
    pub text: String,
    /// The bytes it adds to the output (empty for EOS).
    pub bytes: Vec<u8>,
    /// Its raw logit; `None` for a forced token.
    pub logit: Option<f32>,
}

/// One of the highest raw logits of a step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopLogit {
    /// The token id.
    pub id: u32,
    /// The token's text (lossy UTF-8 of its bytes; a special token's name).
    pub text: String,
    /// Its raw logit, before the constraint's mask.
    pub logit: f32,
    /// Whether the constraint allowed it.
    pub allowed: bool,
}

/// One output token and what the model saw when it was picked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceStep {
    /// Index of this token in the output, from 0.
    pub step: usize,
    /// The token that was appended.
    pub token: TraceToken,
    /// Whether jump-forward appended the token without consulting the model.
    pub forced: bool,
    /// Natural-log probability of the token under the masked distribution
    /// (0 for a forced token).
    pub logprob: f64,
    /// Number of tokens the constraint allowed (the whole logits width
    /// unconstrained; 1 for a forced token).
    pub allowed_count: usize,
    /// The probability the constraint removed (`1 − mass kept`).
    pub allowed_mass: Option<f64>,
    /// The step's highest raw logits, best first (at most [`TOP_LOGITS`];
    /// empty for a forced token).
    pub top: Vec<TopLogit>,
}

/// A whole traced generation, as `--trace FILE` writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    /// The model (its file).
    pub model: String,
    /// The prompt (the user message).
    pub prompt: String,
    /// The generation settings (sampling, budget, seed...).
    pub settings: serde_json::Value,
    /// One entry per output token, in order.
    pub steps: Vec<TraceStep>,
    /// Sum of the steps' `logprob`s.
    pub sequence_logprob: f64,
    /// Beam search only: the output's score, `sequence_logprob /
    /// steps^length_penalty` (absent from other traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Beam search only: the length penalty `A` of the score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length_penalty: Option<f32>,
}

impl Trace {
    /// A trace over `steps`; `sequence_logprob` is their sum.
    pub fn new(
        model: impl Into<String>,
        prompt: impl Into<String>,
        settings: serde_json::Value,
        steps: Vec<TraceStep>,
    ) -> Trace {
        let sequence_logprob = steps.iter().map(|s| s.logprob).sum();
        Trace {
            model: model.into(),
            prompt: prompt.into(),
            settings,
            steps,
            sequence_logprob,
            score: None,
            length_penalty: None,
        }
    }

    /// The trace of a beam search's output: its `score` under length
    /// penalty `length_penalty`.
    pub fn with_score(mut self, score: f64, length_penalty: f32) -> Trace {
        self.score = Some(score);
        self.length_penalty = Some(length_penalty);
        self
    }
}

/// A token's text for people: its bytes (lossy UTF-8), else an added or
/// special token's name, else `#id`.
pub fn token_text(vocab: &Vocabulary, id: TokenId) -> String {
    if let Some(b) = vocab.token_bytes(id) {
        return String::from_utf8_lossy(b).into_owned();
    }
    if let Some(a) = vocab.added_tokens().iter().find(|a| a.0 == id) {
        return a.1.clone();
    }
    format!("#{id}")
}

fn logsumexp<I: Iterator<Item = f32> + Clone>(xs: I) -> f64 {
    // Two passes, no allocation: the max, then the shifted sum.
    let m = xs
        .clone()
        .filter(|x| !x.is_nan())
        .fold(f32::NEG_INFINITY, f32::max);
    if !m.is_finite() {
        return m as f64;
    }
    let sum: f64 = xs
        .filter(|x| !x.is_nan())
        .map(|x| ((x - m) as f64).exp())
        .sum();
    m as f64 + sum.ln()
}

/// `exp(x)` for `x ≤ 0` in f32, branch-free (Cephes' `expf`: `x = n·ln 2 +
/// r`, a degree-6 polynomial in `r`, `2^n` from the exponent bits; relative
/// error ~1e-7, as `f32::exp`). NaN, −∞ and anything below −87 (whose `exp`
/// is under f32's normal range) give 0. A loop over it vectorizes, which
/// `f32::exp` (a libm call per term) does not: the trace's one pass over the
/// vocabulary is then a small part of a decode step.
#[inline(always)]
fn exp_nonpos(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let under = !(x >= -87.0);
    let x = if under { 0.0 } else { x.min(0.0) };
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 5.000_000_1e-1;
    let y = p * r * r + r + 1.0;
    let scale = f32::from_bits((((n as i32) + 127) as u32) << 23);
    if under {
        0.0
    } else {
        y * scale
    }
}

/// The sum of a block in 16 lanes (a fixed association, so it vectorizes).
#[inline(always)]
fn lane_sum(xs: &[f32]) -> f32 {
    let mut lanes = [0f32; 16];
    let mut chunks = xs.chunks_exact(16);
    for c in &mut chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += x;
        }
    }
    let mut s: f32 = chunks.remainder().iter().sum();
    for l in lanes {
        s += l;
    }
    s
}

/// `(logsumexp(all logits), logsumexp(allowed logits), allowed count)` in
/// one pass over the vocabulary: the terms `exp(x − max)` in f32 (what
/// makes the trace cheap next to a forward pass; relative error ~1e-7),
/// summed in f64. A small mask sums its own terms; a mask whose terms all
/// underflow (every allowed logit ~87 below the best) is redone exactly.
/// A small mask's sum is exact (f64 over its own logits): one allowed token
/// has log-probability exactly 0.
fn mass(logits: &[f32], allowed: Option<&TokenSet>) -> (f64, f64, usize) {
    let m = logits
        .iter()
        .copied()
        .filter(|x| !x.is_nan())
        .fold(f32::NEG_INFINITY, f32::max);
    if !m.is_finite() {
        let all = logsumexp(logits.iter().copied());
        let kept = allowed.map_or(all, |a| {
            logsumexp(
                a.iter()
                    .filter_map(|t| logits.get(t.as_usize()).copied())
                    .collect::<Vec<_>>()
                    .into_iter(),
            )
        });
        return (all, kept, allowed.map_or(logits.len(), |a| a.len()));
    }
    let mut total = 0.0f64;
    let mut kept = 0.0f64;
    let large = allowed.filter(|a| a.len() * 8 >= logits.len());
    // Blocks of 64 f32 terms (one mask word each), each block summed in
    // f64; `exp_nonpos` is branch-free, so the block vectorizes.
    let mut terms = [0f32; 64];
    for (w, c) in logits.chunks(64).enumerate() {
        let terms = &mut terms[..c.len()];
        for (t, &x) in terms.iter_mut().zip(c) {
            *t = exp_nonpos(x - m);
        }
        total += lane_sum(terms) as f64;
        if let Some(a) = large {
            let word = a.words().get(w).copied().unwrap_or(0);
            let mut k = 0f32;
            for (j, &t) in terms.iter().enumerate() {
                k += if (word >> j) & 1 == 1 { t } else { 0.0 };
            }
            kept += k as f64;
        }
    }
    if allowed.is_none() {
        kept = total;
    }
    let all = m as f64 + total.ln();
    let kept = match allowed {
        // A small mask (or one whose f32 terms all underflowed): exactly,
        // in f64 over its own logits.
        Some(a) if a.len() * 8 < logits.len() || kept <= 0.0 => logsumexp(
            a.iter()
                .filter_map(|t| logits.get(t.as_usize()).copied())
                .collect::<Vec<f32>>()
                .into_iter(),
        ),
        _ => m as f64 + kept.ln(),
    };
    (all, kept, allowed.map_or(logits.len(), |a| a.len()))
}

/// The `k` highest finite logits, best first, lowest id on ties.
pub fn top_logits(logits: &[f32], k: usize) -> Vec<(TokenId, f32)> {
    let mut top: Vec<(TokenId, f32)> = Vec::with_capacity(k + 1);
    for (i, &x) in logits.iter().enumerate() {
        if !x.is_finite() || k == 0 {
            continue;
        }
        if top.len() == k && x <= top[k - 1].1 {
            continue;
        }
        // Insert after every entry >= x (keeps lower ids first on ties).
        let at = top.partition_point(|&(_, y)| y >= x);
        top.insert(at, (TokenId(i as u32), x));
        top.truncate(k);
    }
    top
}

/// The step of a sampled token: `logits` are the raw logits it was picked
/// from, `allowed` the constraint's mask (`None`: unconstrained).
pub fn sampled_step(
    step: usize,
    logits: &[f32],
    allowed: Option<&TokenSet>,
    chosen: TokenId,
    vocab: &Vocabulary,
) -> TraceStep {
    let is_allowed = |t: TokenId| allowed.is_none_or(|m| m.contains(t));
    let (all, kept, allowed_count) = mass(logits, allowed);
    let logit = logits.get(chosen.as_usize()).copied();
    // (≤ 0 by definition; the f32 terms of a large mask could round above.)
    let logprob = logit.map_or(f64::NEG_INFINITY, |l| (f64::from(l) - kept).min(0.0));
    let removed = if all.is_finite() && kept.is_finite() {
        (1.0 - (kept - all).exp()).max(0.0)
    } else {
        1.0
    };
    TraceStep {
        step,
        token: TraceToken {
            id: chosen.0,
            text: token_text(vocab, chosen),
            bytes: vocab.decode(&[chosen]),
            logit,
        },
        forced: false,
        logprob,
        allowed_count,
        allowed_mass: Some(removed),
        top: top_logits(logits, TOP_LOGITS)
            .into_iter()
            .map(|(t, l)| TopLogit {
                id: t.0,
                text: token_text(vocab, t),
                logit: l,
                allowed: is_allowed(t),
            })
            .collect(),
    }
}

/// The step of a token appended by jump-forward: no logits, log-probability 0.
pub fn forced_step(step: usize, token: TokenId, vocab: &Vocabulary) -> TraceStep {
    TraceStep {
        step,
        token: TraceToken {
            id: token.0,
            text: token_text(vocab, token),
            bytes: vocab.decode(&[token]),
            logit: None,
        },
        forced: true,
        logprob: 0.0,
        allowed_count: 1,
        allowed_mass: None,
        top: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_nonpos_matches_f64_exp() {
        let mut worst = 0f64;
        for i in 0..=870_000 {
            let x = -(i as f32) * 1e-4;
            let got = exp_nonpos(x) as f64;
            let want = (x as f64).exp();
            worst = worst.max(((got - want) / want).abs());
        }
        assert!(worst < 4e-7, "relative error {worst}");
        assert_eq!(exp_nonpos(f32::NAN), 0.0);
        assert_eq!(exp_nonpos(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_nonpos(-100.0), 0.0);
        assert_eq!(exp_nonpos(0.0), 1.0);
    }

    #[test]
    fn mass_agrees_with_exact_sums() {
        // Pseudo-random logits over a Qwen-sized row, a large and a small mask.
        let n = 151_936;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let logits: Vec<f32> = (0..n)
            .map(|_| (next() % 4000) as f32 / 100.0 - 20.0)
            .collect();
        let mut big = TokenSet::new(n);
        let mut small = TokenSet::new(n);
        for i in 0..n {
            if next() % 3 != 0 {
                big.insert(TokenId(i as u32));
            }
            if i % 9973 == 0 {
                small.insert(TokenId(i as u32));
            }
        }
        let exact = |set: Option<&TokenSet>| {
            let xs: Vec<f64> = (0..n)
                .filter(|&i| set.is_none_or(|s| s.contains(TokenId(i as u32))))
                .map(|i| logits[i] as f64)
                .collect();
            let m = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            m + xs.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
        };
        for set in [None, Some(&big), Some(&small)] {
            let (all, kept, count) = mass(&logits, set);
            assert!((all - exact(None)).abs() < 1e-5, "{all} vs {}", exact(None));
            assert!((kept - exact(set)).abs() < 1e-5, "{kept} vs {}", exact(set));
            assert_eq!(count, set.map_or(n, |s| s.len()));
        }
    }

    #[test]
    fn top_logits_order_and_ties() {
        let l = [1.0, 3.0, 3.0, f32::NAN, -1.0, 2.0, f32::NEG_INFINITY];
        let t = top_logits(&l, 3);
        assert_eq!(t, [(TokenId(1), 3.0), (TokenId(2), 3.0), (TokenId(5), 2.0)]);
        assert_eq!(top_logits(&l, 10).len(), 5);
        assert!(top_logits(&l, 0).is_empty());
    }

    #[test]
    fn logsumexp_matches_the_definition() {
        let x = [0.5f32, -1.0, 2.0];
        let want = x.iter().map(|&v| (v as f64).exp()).sum::<f64>().ln();
        assert!((logsumexp(x.iter().copied()) - want).abs() < 1e-12);
        assert_eq!(
            logsumexp([f32::NEG_INFINITY].into_iter()),
            f64::NEG_INFINITY
        );
    }
}
