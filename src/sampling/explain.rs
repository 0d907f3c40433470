//! "Probabilities after each stage": the pipeline run one stage at a time on a
//! whole logits slice, with the softmax taken after every stage. For the
//! `constrain distribution` explainer and for tests; the
//! [`Sampler`](super::Sampler) is the fast path.

use super::stages::{
    apply_logit_bias, apply_mask, apply_penalties, apply_temperature, min_p, probabilities, top_k,
    top_p,
};
use super::{SamplingConfig, SamplingError};
use crate::vocab::{TokenId, TokenSet};

/// One stage of the pipeline, in pipeline order.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The raw logits (softmax at T = 1).
    Logits,
    /// Constraint mask: disallowed tokens removed.
    Mask,
    /// Logit bias added.
    LogitBias,
    /// Repetition, frequency and presence penalties applied.
    Penalties,
    /// Divided by the temperature (T = 0: only the argmax left).
    Temperature,
    /// Top-k filter.
    TopK,
    /// Top-p (nucleus) filter.
    TopP,
    /// Min-p filter.
    MinP,
}

impl Stage {
    /// The stage's name: `logits`, `mask`, `logit_bias`, `penalties`,
    /// `temperature`, `top_k`, `top_p`, `min_p`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Logits => "logits",
            Stage::Mask => "mask",
            Stage::LogitBias => "logit_bias",
            Stage::Penalties => "penalties",
            Stage::Temperature => "temperature",
            Stage::TopK => "top_k",
            Stage::TopP => "top_p",
            Stage::MinP => "min_p",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The distribution after one stage.
#[derive(Clone, Debug, PartialEq)]
pub struct StageProbabilities {
    /// The stage just applied.
    pub stage: Stage,
    /// One probability per token (0 for removed ones); sums to 1.
    pub probs: Vec<f32>,
    /// The logits after the stage (`-inf` for removed ones).
    pub logits: Vec<f32>,
}

/// What [`explain`] returns: the distribution after each active stage, and the
/// final one the pick draws from.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// [`Stage::Logits`] first, then each stage the config (and mask, history)
    /// makes active, in pipeline order.
    pub stages: Vec<StageProbabilities>,
    /// The distribution the pick draws from (one-hot on the argmax when greedy).
    pub final_probs: Vec<f32>,
}

/// Runs the pipeline one stage at a time and records the probabilities after
/// each stage that does something (the mask when given, the bias when
/// non-empty, penalties when on and the history non-empty, temperature when
/// not 1, top-k when `k >= 1`, top-p when `< 1`, min-p when `> 0`).
///
/// Errors: an invalid config, a mask whose width differs from the logits, an
/// id out of range, or a stage that removes every token.
///
/// ```
/// use constrain::sampling::{explain, SamplingConfig};
/// let config = SamplingConfig::default().top_k(2);
/// let e = explain(&[2.0, 1.0, 0.0], None, &[], &config)?;
/// assert_eq!(e.stages.len(), 2); // logits, top_k
/// assert_eq!(e.final_probs[2], 0.0);
/// assert!((e.final_probs[0] - 1.0 / (1.0 + (-1.0f32).exp())).abs() < 1e-6);
/// # Ok::<(), constrain::sampling::SamplingError>(())
/// ```
pub fn explain(
    logits: &[f32],
    mask: Option<&TokenSet>,
    history: &[TokenId],
    config: &SamplingConfig,
) -> Result<Explanation, SamplingError> {
    config.validate()?;
    if let Some(m) = mask {
        if m.width() != logits.len() {
            return Err(SamplingError::MaskWidth {
                mask: m.width(),
                logits: logits.len(),
            });
        }
    }
    let mut cur = logits.to_vec();
    let mut stages = Vec::new();
    let mut record = |stage: Stage, cur: &[f32]| -> Result<(), SamplingError> {
        stages.push(StageProbabilities {
            stage,
            probs: probabilities(cur)?,
            logits: cur.to_vec(),
        });
        Ok(())
    };
    record(Stage::Logits, &cur)?;
    if let Some(m) = mask {
        apply_mask(&mut cur, m);
        record(Stage::Mask, &cur)?;
    }
    if !config.logit_bias.is_empty() {
        apply_logit_bias(&mut cur, &config.logit_bias)?;
        record(Stage::LogitBias, &cur)?;
    }
    let pen = config.penalties();
    if !pen.is_off() && !history.is_empty() {
        apply_penalties(&mut cur, history, &pen)?;
        record(Stage::Penalties, &cur)?;
    }
    if config.temperature != 1.0 {
        apply_temperature(&mut cur, config.temperature);
        record(Stage::Temperature, &cur)?;
    }
    if config.top_k >= 1 {
        top_k(&mut cur, config.top_k);
        record(Stage::TopK, &cur)?;
    }
    if config.top_p < 1.0 {
        top_p(&mut cur, config.top_p);
        record(Stage::TopP, &cur)?;
    }
    if config.min_p > 0.0 {
        min_p(&mut cur, config.min_p);
        record(Stage::MinP, &cur)?;
    }
    let final_probs = probabilities(&cur)?;
    Ok(Explanation {
        stages,
        final_probs,
    })
}
