//! [`SamplingConfig`]: the knobs of the pipeline, as a plain value, with the
//! defaults documented where they are set and one [`SamplingConfig::validate`]
//! that names the offending parameter and its allowed range.

use super::SamplingError;
use crate::vocab::TokenId;

/// Every knob of the sampling pipeline. A plain value: build it with struct
/// update syntax over [`SamplingConfig::default`] (or [`SamplingConfig::greedy`])
/// and hand it to [`Sampler::new`](super::Sampler::new), which validates it.
///
/// The defaults leave the distribution untouched: plain sampling at T = 1.
///
/// ```
/// use constrain::sampling::SamplingConfig;
/// let config = SamplingConfig::default().temperature(0.7).top_k(50).top_p(0.9);
/// config.validate()?;
/// assert!(config.clone().top_p(0.0).validate().is_err());
/// # Ok::<(), constrain::sampling::SamplingError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SamplingConfig {
    /// Divides the logits; `0` means greedy (argmax). Finite and `>= 0`. Default `1.0`.
    pub temperature: f32,
    /// Keep the `k` most likely tokens; `0` disables the stage (as llama.cpp and
    /// Hugging Face do). Default `0`.
    pub top_k: usize,
    /// Keep the smallest set, in descending probability, whose mass reaches `p`
    /// (always at least the top token). `0 < p <= 1`; `1` disables. Default `1.0`.
    pub top_p: f32,
    /// Keep tokens whose probability is at least `min_p × p_max`. `0 <= p <= 1`;
    /// `0` disables. Default `0.0`.
    pub min_p: f32,
    /// Multiplicative repetition penalty θ (CTRL / Hugging Face / llama.cpp): a
    /// positive logit of an already generated token is divided by θ, a negative
    /// one multiplied by θ. Finite and `> 0`; `1` disables. Default `1.0`.
    pub repetition_penalty: f32,
    /// Additive frequency penalty (OpenAI): subtracts `count × λ` from a token's
    /// logit. Finite (OpenAI allows `-2..=2`; any finite value is accepted). Default `0`.
    pub frequency_penalty: f32,
    /// Additive presence penalty (OpenAI): subtracts `λ` once a token has
    /// appeared. Finite. Default `0`.
    pub presence_penalty: f32,
    /// Penalise only the last `n` tokens of the history; `None` (the default)
    /// looks at all of it, `Some(0)` at none.
    pub penalty_last_n: Option<usize>,
    /// Added to the logit of each listed token id; `-inf` forbids the token.
    /// Any value but NaN. Ids must lie inside the logits width (checked when
    /// sampling, since the width is only known then). Default: empty.
    pub logit_bias: Vec<(TokenId, f32)>,
}

crate::config_setters!(SamplingConfig {
    temperature: f32,
    top_k: usize,
    top_p: f32,
    min_p: f32,
    repetition_penalty: f32,
    frequency_penalty: f32,
    presence_penalty: f32,
    penalty_last_n: Option<usize>,
    logit_bias: Vec<(TokenId, f32)>,
});

impl Default for SamplingConfig {
    fn default() -> Self {
        SamplingConfig {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            repetition_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_last_n: None,
            logit_bias: Vec::new(),
        }
    }
}

impl SamplingConfig {
    /// Deterministic decoding: temperature 0 (argmax, lowest id on ties), every
    /// other knob at its default.
    pub fn greedy() -> Self {
        SamplingConfig {
            temperature: 0.0,
            ..SamplingConfig::default()
        }
    }

    /// True when temperature is 0: the pick is the argmax.
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }

    /// The penalty knobs as the [`apply_penalties`](super::apply_penalties) stage takes them.
    pub fn penalties(&self) -> Penalties {
        Penalties {
            repetition: self.repetition_penalty,
            frequency: self.frequency_penalty,
            presence: self.presence_penalty,
            last_n: self.penalty_last_n,
        }
    }

    /// Checks every value against its allowed range; the error names the first
    /// parameter out of range, its value and the range.
    pub fn validate(&self) -> Result<(), SamplingError> {
        fn bad(name: &'static str, value: impl ToString, allowed: &'static str) -> SamplingError {
            SamplingError::InvalidParameter {
                name,
                value: value.to_string(),
                allowed,
            }
        }
        let t = self.temperature;
        if !(t.is_finite() && t >= 0.0) {
            return Err(bad("temperature", t, "a finite number >= 0 (0 = greedy)"));
        }
        let p = self.top_p;
        if !(p > 0.0 && p <= 1.0) {
            return Err(bad("top_p", p, "in (0, 1] (1 = off)"));
        }
        let m = self.min_p;
        if !(0.0..=1.0).contains(&m) {
            return Err(bad("min_p", m, "in [0, 1] (0 = off)"));
        }
        let r = self.repetition_penalty;
        if !(r.is_finite() && r > 0.0) {
            return Err(bad(
                "repetition_penalty",
                r,
                "a finite number > 0 (1 = off)",
            ));
        }
        if !self.frequency_penalty.is_finite() {
            return Err(bad(
                "frequency_penalty",
                self.frequency_penalty,
                "a finite number (0 = off)",
            ));
        }
        if !self.presence_penalty.is_finite() {
            return Err(bad(
                "presence_penalty",
                self.presence_penalty,
                "a finite number (0 = off)",
            ));
        }
        if let Some(&(id, v)) = self.logit_bias.iter().find(|(_, v)| v.is_nan()) {
            return Err(bad(
                "logit_bias",
                format!("{id}={v}"),
                "a number or -inf per token (NaN is not allowed)",
            ));
        }
        Ok(())
    }
}

/// The penalty knobs of [`SamplingConfig`], for the
/// [`apply_penalties`](super::apply_penalties) stage.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Penalties {
    /// Multiplicative repetition penalty θ (1 = off).
    pub repetition: f32,
    /// Additive frequency penalty λ_freq (0 = off).
    pub frequency: f32,
    /// Additive presence penalty λ_pres (0 = off).
    pub presence: f32,
    /// Only the last `n` tokens of the history count (`None` = all).
    pub last_n: Option<usize>,
}

impl Penalties {
    /// True when the stage changes nothing whatever the history.
    pub fn is_off(&self) -> bool {
        self.repetition == 1.0 && self.frequency == 0.0 && self.presence == 0.0
    }
}
