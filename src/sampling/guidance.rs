//! # Guidance: steering the distribution with a second pass
//!
//! Two ways to combine two sets of logits into one, applied **before** the
//! constraint mask and the sampling pipeline:
//!
//! * **Classifier-free guidance** (CFG; Sanchez et al. 2023 for language
//!   models): `logits_uncond + G · (logits_cond − logits_uncond)`, where the
//!   unconditional pass runs on a negative (or empty) prompt. `G = 1` is plain
//!   decoding (the conditional logits, bit for bit, so the second pass can be
//!   skipped); `G > 1` pushes away from what the negative prompt would say.
//! * **Contrastive decoding** (Li et al. 2023): the expert's minus the
//!   amateur's log-probabilities, over the tokens whose expert probability is
//!   at least `α · max` (the plausibility constraint); the others are removed.
//!   Here the cutoff's `max` is taken over the tokens the *constraint allows*,
//!   so the expert's favourite allowed token always survives and the mask can
//!   never be left with nothing. (Hugging Face's `penalty_alpha` is
//!   contrastive *search*, a different method: a degeneration penalty on
//!   hidden-state similarity, not a second model.)
//!
//! Removed or `-inf` logits stay removed; NaN counts as removed.

use super::stages::probabilities;
use super::SamplingError;
use crate::vocab::TokenSet;

/// Classifier-free guidance: `uncond + scale · (cond − uncond)` per token.
/// `scale == 1` returns `cond` unchanged. A token removed (`-inf`/NaN) in
/// either pass is removed in the result. Errors on different widths or a
/// non-finite scale.
///
/// ```
/// use constrain::sampling::classifier_free_guidance;
/// let g = classifier_free_guidance(&[2.0, 1.0], &[1.0, 1.0], 3.0)?;
/// assert_eq!(g, [4.0, 1.0]);
/// assert_eq!(classifier_free_guidance(&[2.0, 1.0], &[9.0, 0.0], 1.0)?, [2.0, 1.0]);
/// # Ok::<(), constrain::sampling::SamplingError>(())
/// ```
pub fn classifier_free_guidance(
    cond: &[f32],
    uncond: &[f32],
    scale: f32,
) -> Result<Vec<f32>, SamplingError> {
    if !scale.is_finite() {
        return Err(SamplingError::InvalidParameter {
            name: "guidance_scale",
            value: scale.to_string(),
            allowed: "a finite number",
        });
    }
    if cond.len() != uncond.len() {
        return Err(SamplingError::MaskWidth {
            mask: uncond.len(),
            logits: cond.len(),
        });
    }
    if scale == 1.0 {
        return Ok(cond.to_vec());
    }
    Ok(cond
        .iter()
        .zip(uncond)
        .map(|(&c, &u)| {
            let g = u + scale * (c - u);
            if c == f32::NEG_INFINITY || u == f32::NEG_INFINITY || g.is_nan() {
                f32::NEG_INFINITY
            } else {
                g
            }
        })
        .collect())
}

/// Contrastive decoding: `log p_expert − log p_amateur` over the tokens with
/// `p_expert >= alpha × max`, the max taken over `allowed` (all tokens when
/// `None`); every other token `-inf`. At least one allowed token survives
/// when any allowed token has expert mass. Errors: widths that differ, `alpha`
/// outside `[0, 1]`, or no mass at all.
///
/// ```
/// use constrain::sampling::contrastive;
/// // The expert prefers 0 and 1 about equally; the amateur loves 0: 1 wins.
/// let expert = [2.0, 1.9, -5.0];
/// let amateur = [3.0, 0.0, 0.0];
/// let c = contrastive(&expert, &amateur, 0.1, None)?;
/// assert!(c[1] > c[0]);
/// assert_eq!(c[2], f32::NEG_INFINITY); // implausible under the expert
/// # Ok::<(), constrain::sampling::SamplingError>(())
/// ```
pub fn contrastive(
    expert: &[f32],
    amateur: &[f32],
    alpha: f32,
    allowed: Option<&TokenSet>,
) -> Result<Vec<f32>, SamplingError> {
    if !(0.0..=1.0).contains(&alpha) {
        return Err(SamplingError::InvalidParameter {
            name: "contrastive_alpha",
            value: alpha.to_string(),
            allowed: "in [0, 1]",
        });
    }
    if expert.len() != amateur.len() {
        return Err(SamplingError::MaskWidth {
            mask: amateur.len(),
            logits: expert.len(),
        });
    }
    if let Some(m) = allowed {
        if m.width() != expert.len() {
            return Err(SamplingError::MaskWidth {
                mask: m.width(),
                logits: expert.len(),
            });
        }
    }
    let pe = probabilities(expert)?;
    let pa = probabilities(amateur)?;
    let is_allowed = |i: usize| allowed.is_none_or(|m| m.contains(crate::vocab::TokenId(i as u32)));
    let max = pe
        .iter()
        .enumerate()
        .filter(|&(i, _)| is_allowed(i))
        .map(|(_, &p)| p)
        .fold(0.0f32, f32::max);
    if max <= 0.0 {
        return Err(SamplingError::AllRemoved);
    }
    let cutoff = alpha * max;
    Ok(pe
        .iter()
        .zip(&pa)
        .enumerate()
        .map(|(i, (&e, &a))| {
            if e > 0.0 && e >= cutoff && is_allowed(i) {
                // An amateur probability of 0 (it removed the token) would
                // give +inf: count it as the smallest positive f32 instead.
                e.ln() - a.max(f32::MIN_POSITIVE).ln()
            } else {
                f32::NEG_INFINITY
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::TokenId;

    #[test]
    fn cfg_formula_and_removed_tokens() {
        let g = classifier_free_guidance(&[1.0, f32::NEG_INFINITY, 0.5], &[0.0, 1.0, 1.5], 2.0)
            .unwrap();
        assert_eq!(g, [2.0, f32::NEG_INFINITY, -0.5]);
        assert!(classifier_free_guidance(&[1.0], &[1.0, 2.0], 2.0).is_err());
        assert!(classifier_free_guidance(&[1.0], &[1.0], f32::NAN).is_err());
    }

    /// The expert's favourite is masked: a cutoff over all tokens would keep
    /// only it and leave nothing allowed; over the allowed ones, the best
    /// allowed token survives.
    #[test]
    fn contrastive_cutoff_is_over_the_allowed_tokens() {
        let expert = [10.0, 0.0, -1.0, -8.0];
        let amateur = [0.0, 0.0, 0.0, 0.0];
        let mut mask = TokenSet::new(4);
        mask.insert(TokenId(1));
        mask.insert(TokenId(2));
        mask.insert(TokenId(3));
        let c = contrastive(&expert, &amateur, 0.5, Some(&mask)).unwrap();
        assert_eq!(c[0], f32::NEG_INFINITY, "masked");
        assert!(c[1].is_finite(), "the best allowed token survives");
        assert_eq!(c[2], f32::NEG_INFINITY, "below 0.5 × max over allowed");
        assert_eq!(c[3], f32::NEG_INFINITY);
        // Unmasked, the same alpha keeps only token 0.
        let c = contrastive(&expert, &amateur, 0.5, None).unwrap();
        assert!(c[0].is_finite() && c[1..].iter().all(|&x| x == f32::NEG_INFINITY));
        assert!(contrastive(&expert, &amateur, 1.5, None).is_err());
    }
}
