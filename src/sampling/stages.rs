//! The stages as small functions over a whole logits slice (`logits[id]`),
//! in pipeline order. Removal writes `-inf`. They are what the explainer
//! ([`explain`](super::explain)) runs step by step; the
//! [`Sampler`](super::Sampler) runs the same filters on the survivors only.

use super::candidates::Candidates;
use super::config::Penalties;
use super::SamplingError;
use crate::vocab::{TokenId, TokenSet};
use rand::Rng;

/// Stage 1, the constraint mask: every id not in `mask` becomes `-inf`
/// (ids past the mask's width included).
pub fn apply_mask(logits: &mut [f32], mask: &TokenSet) {
    let words = mask.words();
    for (wi, chunk) in logits.chunks_mut(64).enumerate() {
        let w = words.get(wi).copied().unwrap_or(0);
        if w == u64::MAX {
            continue;
        }
        for (j, x) in chunk.iter_mut().enumerate() {
            if (w >> j) & 1 == 0 {
                *x = f32::NEG_INFINITY;
            }
        }
    }
}

fn check_id(id: TokenId, what: &'static str, width: usize) -> Result<usize, SamplingError> {
    let i = id.as_usize();
    if i < width {
        Ok(i)
    } else {
        Err(SamplingError::TokenOutOfRange { what, id, width })
    }
}

/// Stage 2, logit bias: adds `v` to `logits[id]` for each `(id, v)`; `-inf`
/// forbids the token. An id outside the slice is an error (nothing is changed).
pub fn apply_logit_bias(logits: &mut [f32], bias: &[(TokenId, f32)]) -> Result<(), SamplingError> {
    for &(id, _) in bias {
        check_id(id, "logit_bias", logits.len())?;
    }
    for &(id, v) in bias {
        logits[id.as_usize()] += v;
    }
    Ok(())
}

/// The penalty a token with `count` appearances receives, applied to logit `x`:
/// repetition (θ divides a positive logit, multiplies a negative one), then
/// `count × frequency + presence` subtracted. The same rule llama.cpp applies.
#[inline]
pub fn penalise(x: f32, count: u32, p: &Penalties) -> f32 {
    if count == 0 {
        return x;
    }
    let x = if p.repetition == 1.0 {
        x
    } else if x > 0.0 {
        x / p.repetition
    } else {
        x * p.repetition
    };
    x - (count as f32 * p.frequency + p.presence)
}

/// Counts each distinct token of the penalised window of `history` (the last
/// `last_n`, or all of it) into `counts` as `(id, count)`, ascending by id.
/// Only tokens for which `wanted` holds are counted (the sampler skips tokens
/// a sparse mask removes anyway). `scratch` is reused between calls. An id at
/// or past `width` is an error.
pub(crate) fn count_history(
    history: &[TokenId],
    p: &Penalties,
    width: usize,
    wanted: impl Fn(TokenId) -> bool,
    scratch: &mut Vec<u32>,
    counts: &mut Vec<(u32, u32)>,
) -> Result<(), SamplingError> {
    counts.clear();
    let window = match p.last_n {
        Some(n) => &history[history.len().saturating_sub(n)..],
        None => history,
    };
    scratch.clear();
    for &t in window {
        check_id(t, "history", width)?;
        if wanted(t) {
            scratch.push(t.0);
        }
    }
    scratch.sort_unstable();
    for &t in scratch.iter() {
        match counts.last_mut() {
            Some((id, c)) if *id == t => *c += 1,
            _ => counts.push((t, 1)),
        }
    }
    Ok(())
}

/// Stage 3, penalties over the tokens generated so far (see [`penalise`]).
/// A history id outside the slice is an error (nothing is changed).
pub fn apply_penalties(
    logits: &mut [f32],
    history: &[TokenId],
    penalties: &Penalties,
) -> Result<(), SamplingError> {
    if penalties.is_off() {
        return Ok(());
    }
    let (mut scratch, mut counts) = (Vec::new(), Vec::new());
    count_history(
        history,
        penalties,
        logits.len(),
        |_| true,
        &mut scratch,
        &mut counts,
    )?;
    for &(id, c) in &counts {
        let x = &mut logits[id as usize];
        *x = penalise(*x, c, penalties);
    }
    Ok(())
}

fn write_back(logits: &mut [f32], c: &Candidates) {
    // Removed entries become -inf; survivors keep their value (so +inf stays +inf).
    let mut next = c.ids.iter().peekable();
    for (i, x) in logits.iter_mut().enumerate() {
        if next.peek().map(|&&id| id as usize) == Some(i) {
            next.next();
        } else {
            *x = f32::NEG_INFINITY;
        }
    }
}

/// Stage 4, temperature: the logits become `(x - max) / t` (the distribution of
/// `x / t`; shifting first keeps tiny temperatures from overflowing). `t = 0`
/// is greedy: only the best token (lowest id on ties) survives, at logit 0.
/// NaN becomes `-inf`; if some logits are `+inf` they are certain: they stay
/// (as 0) and everything else is removed. `t` must be finite and `>= 0`.
pub fn apply_temperature(logits: &mut [f32], t: f32) {
    let mut c = Candidates::default();
    c.gather_live(logits);
    c.resolve_infinite();
    if t == 0.0 {
        if let Some(b) = c.argmax() {
            let id = c.ids[b];
            c.ids.clear();
            c.ids.push(id);
            c.logits.clear();
            c.logits.push(0.0);
        }
    } else {
        c.shift_and_scale(t);
    }
    write_back(logits, &c);
    for (&id, &x) in c.ids.iter().zip(&c.logits) {
        logits[id as usize] = x;
    }
}

/// Stage 5, top-k: keeps the `k` highest logits (ties: lowest id), by
/// selection, never sorting the slice. `k = 0` disables the stage.
pub fn top_k(logits: &mut [f32], k: usize) {
    if k == 0 {
        return;
    }
    let mut c = Candidates::default();
    c.gather_live(logits);
    c.top_k(k);
    write_back(logits, &c);
}

fn weighted(logits: &[f32]) -> Candidates {
    let mut c = Candidates::default();
    c.gather_live(logits);
    c.resolve_infinite();
    c.shift_and_scale(1.0);
    c.compute_weights();
    c
}

/// Stage 6, top-p (nucleus): keeps the smallest set of tokens, in descending
/// probability (ties: lowest id), whose probability mass reaches `p`; always at
/// least the top token. `p >= 1` disables the stage.
pub fn top_p(logits: &mut [f32], p: f32) {
    if p >= 1.0 {
        return;
    }
    let mut c = weighted(logits);
    c.top_p(p);
    write_back(logits, &c);
}

/// Stage 7, min-p: keeps the tokens whose probability is at least
/// `min_p × p_max`. `min_p <= 0` disables the stage.
pub fn min_p(logits: &mut [f32], min_p: f32) {
    if min_p <= 0.0 {
        return;
    }
    let mut c = weighted(logits);
    c.min_p(min_p);
    write_back(logits, &c);
}

/// The softmax of `logits` (one probability per entry, 0 for removed ones;
/// NaN counts as removed, `+inf` as certain). Every entry removed is an error.
pub fn probabilities(logits: &[f32]) -> Result<Vec<f32>, SamplingError> {
    let c = weighted(logits);
    if c.is_empty() {
        return Err(SamplingError::AllRemoved);
    }
    let total = c.total();
    let mut out = vec![0.0f32; logits.len()];
    for (&id, &w) in c.ids.iter().zip(&c.weights) {
        out[id as usize] = (w as f64 / total) as f32;
    }
    Ok(out)
}

/// Stage 8, greedy pick: the highest logit, lowest id on ties (`+inf` wins,
/// NaN never). Every entry removed is an error.
pub fn greedy(logits: &[f32]) -> Result<TokenId, SamplingError> {
    let mut c = Candidates::default();
    c.gather_live(logits);
    c.resolve_infinite();
    c.argmax()
        .map(|b| TokenId(c.ids[b]))
        .ok_or(SamplingError::AllRemoved)
}

/// Stage 8, random pick: one draw from the softmax of `logits` with `rng`
/// (one `f64` drawn per call). Every entry removed is an error.
pub fn draw<R: Rng + ?Sized>(logits: &[f32], rng: &mut R) -> Result<TokenId, SamplingError> {
    let c = weighted(logits);
    let u: f64 = rng.random();
    c.draw(u)
        .map(|i| TokenId(c.ids[i]))
        .ok_or(SamplingError::AllRemoved)
}
