//! # Speculative sampling: drafting without changing the distribution
//!
//! A small *draft* model proposes a token `x` from its distribution `p_d`; the
//! *target* model, whose distribution `p_t` we want to sample from, accepts it
//! with probability `min(1, p_t(x) / p_d(x))`. On rejection a token is drawn
//! from the **residual** `max(0, p_t − p_d)`, normalised. Whatever the draft,
//! the token that comes out is distributed exactly as `p_t` (Leviathan et
//! al. 2023, Chen et al. 2023): the accepted part contributes
//! `min(p_t, p_d)`, the residual the rest, `p_t − min(p_t, p_d)`. The overall
//! acceptance rate is `Σ min(p_t, p_d) = 1 − TV(p_t, p_d)`.
//!
//! Under a constraint both distributions are taken *after* the same mask (and
//! the same sampling pipeline): a masked token has `p_d = 0`, so it is never
//! proposed, and `p_t = 0`, so the residual never yields it either.
//!
//! This module is the exact math on two probability vectors. The
//! `constrain distribution --draft-logits` explainer shows it;
//! `tests/speculative.rs` checks with a chi-square test that the output
//! distribution equals the target's.

use super::SamplingError;
use crate::vocab::TokenId;
use rand::Rng;

/// Per-token view of one speculative step (all vectors as wide as the
/// distributions).
#[derive(Clone, Debug, PartialEq)]
pub struct Speculation {
    /// `min(1, p_t / p_d)` where the draft can propose the token; 0 where
    /// `p_d = 0` (never proposed).
    pub acceptance: Vec<f64>,
    /// `max(0, p_t − p_d)` normalised: where a rejected draft's replacement
    /// comes from. When `p_t = p_d` nothing is ever rejected and this is `p_t`.
    pub residual: Vec<f64>,
    /// The probability a draft is accepted, `Σ min(p_t, p_d)`.
    pub acceptance_rate: f64,
}

fn check(target: &[f32], draft: &[f32]) -> Result<(), SamplingError> {
    if target.len() != draft.len() {
        return Err(SamplingError::MaskWidth {
            mask: draft.len(),
            logits: target.len(),
        });
    }
    if !target.iter().any(|&p| p > 0.0) || !draft.iter().any(|&p| p > 0.0) {
        return Err(SamplingError::AllRemoved);
    }
    Ok(())
}

/// Acceptance probabilities and the residual for target and draft
/// probabilities (each summing to 1, e.g. [`probabilities`](super::probabilities)
/// of the masked logits). Errors: different widths, or a distribution with no
/// mass.
///
/// ```
/// use constrain::sampling::speculation;
/// let s = speculation(&[0.5, 0.3, 0.2], &[0.2, 0.6, 0.2])?;
/// assert_eq!(s.acceptance, [1.0, 0.5, 1.0]);
/// // max(0, p_t - p_d) = [0.3, 0, 0], normalised.
/// assert_eq!(s.residual, [1.0, 0.0, 0.0]);
/// assert!((s.acceptance_rate - 0.7).abs() < 1e-6);
/// # Ok::<(), constrain::sampling::SamplingError>(())
/// ```
pub fn speculation(target: &[f32], draft: &[f32]) -> Result<Speculation, SamplingError> {
    check(target, draft)?;
    let acceptance = target
        .iter()
        .zip(draft)
        .map(|(&t, &d)| {
            if d > 0.0 {
                (t as f64 / d as f64).min(1.0)
            } else {
                0.0
            }
        })
        .collect();
    let acceptance_rate = target
        .iter()
        .zip(draft)
        .map(|(&t, &d)| (t as f64).min(d as f64))
        .sum();
    Ok(Speculation {
        acceptance,
        residual: residual(target, draft),
        acceptance_rate,
    })
}

/// `max(0, p_t − p_d)` normalised; `p_t` itself when that is all zero.
pub fn residual(target: &[f32], draft: &[f32]) -> Vec<f64> {
    let mut r: Vec<f64> = target
        .iter()
        .zip(draft)
        .map(|(&t, &d)| (t as f64 - d as f64).max(0.0))
        .collect();
    let total: f64 = r.iter().sum();
    if total > 0.0 {
        r.iter_mut().for_each(|x| *x /= total);
    } else {
        let total: f64 = target.iter().map(|&t| t as f64).sum();
        r = target.iter().map(|&t| t as f64 / total).collect();
    }
    r
}

/// The outcome of verifying one drafted token.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The draft token is kept.
    Accepted(TokenId),
    /// The draft token is rejected; this token, drawn from the residual,
    /// takes its place (and ends the drafted run).
    Replaced(TokenId),
}

impl Verdict {
    /// The token that goes into the output either way.
    pub fn token(self) -> TokenId {
        match self {
            Verdict::Accepted(t) | Verdict::Replaced(t) => t,
        }
    }
}

fn draw_from(p: &[f64], u: f64) -> Option<TokenId> {
    let total: f64 = p.iter().sum();
    let mut acc = 0.0;
    let target = u * total;
    let mut last = None;
    for (i, &x) in p.iter().enumerate() {
        if x <= 0.0 {
            continue;
        }
        acc += x;
        last = Some(TokenId(i as u32));
        if target < acc {
            return last;
        }
    }
    last
}

/// Verifies `drafted` (drawn from `draft`) against `target`: accepted with
/// probability `min(1, p_t / p_d)`, else replaced by a draw from the
/// residual. Two `f64`s drawn from `rng` at most.
pub fn verify<R: Rng + ?Sized>(
    target: &[f32],
    draft: &[f32],
    drafted: TokenId,
    rng: &mut R,
) -> Result<Verdict, SamplingError> {
    check(target, draft)?;
    let i = drafted.as_usize();
    let (t, d) = match (target.get(i), draft.get(i)) {
        (Some(&t), Some(&d)) => (t as f64, d as f64),
        _ => {
            return Err(SamplingError::TokenOutOfRange {
                what: "draft",
                id: drafted,
                width: target.len(),
            })
        }
    };
    // A token the draft could not have proposed is never accepted.
    if d > 0.0 {
        let u: f64 = rng.random();
        if u < (t / d).min(1.0) {
            return Ok(Verdict::Accepted(drafted));
        }
    }
    let u: f64 = rng.random();
    draw_from(&residual(target, draft), u)
        .map(Verdict::Replaced)
        .ok_or(SamplingError::AllRemoved)
}

/// One full speculative step on fixed distributions: draw from `draft`, then
/// [`verify`] against `target`. The returned token is distributed as `target`.
pub fn speculative_sample<R: Rng + ?Sized>(
    target: &[f32],
    draft: &[f32],
    rng: &mut R,
) -> Result<Verdict, SamplingError> {
    check(target, draft)?;
    let d: Vec<f64> = draft.iter().map(|&x| x as f64).collect();
    let u: f64 = rng.random();
    let x = draw_from(&d, u).ok_or(SamplingError::AllRemoved)?;
    verify(target, draft, x, rng)
}
