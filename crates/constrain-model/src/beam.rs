//! # Constrained beam search
//!
//! Greedy decoding takes the likeliest token at each step; beam search keeps
//! the `N` likeliest *partial sequences* (hypotheses) and extends them all,
//! looking for the likeliest whole output. Under a constraint each hypothesis
//! carries its own [`Matcher`] (cloned from the request's), so every
//! hypothesis only ever grows by tokens its matcher allows.
//!
//! ## Scoring
//!
//! A token's log-probability is taken under the *masked* distribution at
//! temperature 1 (`logit − logsumexp(allowed logits)`, the same number the
//! step trace records), and a hypothesis scores its summed log-probability
//! divided by `length^A` (`A` = length penalty, default 1, as Hugging Face;
//! the length counts the EOS token when one ends the hypothesis). The
//! sampling pipeline (temperature, top-k/p, penalties) does not apply: beam
//! search is a deterministic search for the likeliest sequence.
//!
//! ## The search
//!
//! Each step extends every live hypothesis by its best allowed tokens, ranks
//! all extensions by score and keeps the `N` best. An extension is
//! **complete** when it picks EOS (which the mask only allows where the text
//! is complete), when its matcher is finished (nothing may follow), or when
//! it reaches `max_tokens`. It is **budget-safe** like the sampling loop: a
//! token after which the remaining budget could not reach acceptance
//! ([`Matcher::fits`]) is never an extension, so every complete hypothesis is
//! in the language. The search stops when nothing is live, or (Hugging Face's
//! heuristic) when `N` hypotheses are complete and no live one scores better
//! than the worst of them.
//!
//! ## Never worse than greedy
//!
//! Textbook beam search can prune the greedy path and end worse than greedy
//! (see `constrain beam` for a worked example). So the greedy completion (the
//! same loop as `--greedy`, jump-forward included) is scored the same way
//! and kept among the candidates: the result never scores worse than
//! greedy's. `N = 1` *is* greedy: it runs the greedy loop itself, so
//! `--beam 1` and `--greedy` give the same output.
//!
//! ## The model's KV cache
//!
//! Hypotheses share the prompt and usually all but their last tokens. Before
//! scoring a hypothesis the search rewinds the model to the longest prefix it
//! shares with what was fed last ([`LanguageModel::truncate`]) and feeds only
//! the rest; a model that cannot rewind (the default) is restarted from
//! position 0 with the whole sequence, which is correct but pays a prefill
//! per hypothesis per step.

use crate::generate::{generate, GenerateConfig, GenerateError, GenerationStats};
use crate::{LanguageModel, ModelError};
use constrain::matcher::Matcher;
use constrain::vocab::{TextTokenizer, TokenId, Vocabulary};
use std::time::Instant;

/// How to search.
#[derive(Clone, Debug)]
pub struct BeamConfig {
    /// Beam width `N >= 1` (1 = greedy).
    pub beams: usize,
    /// `A` in `score = logprob / length^A` (default 1).
    pub length_penalty: f32,
    /// Most tokens generated (EOS not counted); the output is complete
    /// within it.
    pub max_tokens: usize,
    /// Jump-forward for the greedy run (default `true`).
    pub jump_forward: bool,
}

impl Default for BeamConfig {
    fn default() -> Self {
        BeamConfig {
            beams: 4,
            length_penalty: 1.0,
            max_tokens: 256,
            jump_forward: true,
        }
    }
}

/// A complete hypothesis.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// Output tokens (EOS excluded).
    pub tokens: Vec<TokenId>,
    /// Summed log-probabilities (EOS included when it ended the output).
    pub logprob: f64,
    /// `logprob / length^A`.
    pub score: f64,
    /// Ended by EOS.
    pub eos: bool,
}

/// The result of [`beam_search`].
#[derive(Clone, Debug)]
pub struct BeamGeneration {
    /// The best candidate's tokens (EOS excluded).
    pub tokens: Vec<TokenId>,
    /// Its bytes.
    pub bytes: Vec<u8>,
    pub logprob: f64,
    pub score: f64,
    /// Whether the best is greedy's completion (textbook beam search found
    /// nothing better, or `N = 1`).
    pub from_greedy: bool,
    /// Greedy's completion, scored.
    pub greedy: Candidate,
    /// Every complete hypothesis the search kept, best first.
    pub candidates: Vec<Candidate>,
    /// Whether the output is in the constraint's language.
    pub accepted: bool,
    /// Counters (model calls of the whole search, greedy's run included).
    pub stats: GenerationStats,
}

impl BeamGeneration {
    /// The output as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Why beam search was refused, beyond [`GenerateError`].
#[derive(Debug, thiserror::Error)]
pub enum BeamError {
    #[error("invalid beam width 0: the beam width must be at least 1")]
    ZeroBeams,
    #[error("invalid length penalty {0}: must be a finite number")]
    LengthPenalty(f32),
}

/// Feeds sequences to a model, reusing its KV cache where the new sequence
/// shares a prefix with the last one.
struct Feeder<'m, M: LanguageModel + ?Sized> {
    model: &'m mut M,
    /// What the model has read, when known.
    fed: Option<Vec<TokenId>>,
    calls: usize,
}

impl<M: LanguageModel + ?Sized> Feeder<'_, M> {
    /// The logits after `seq` (non-empty).
    fn logits(&mut self, seq: &[TokenId]) -> Result<Vec<f32>, ModelError> {
        self.calls += 1;
        if let Some(fed) = &self.fed {
            let common = fed.iter().zip(seq).take_while(|(a, b)| a == b).count();
            // Keep at least one token to feed.
            let keep = common.min(seq.len() - 1);
            if keep > 0 && (keep == fed.len() || self.model.truncate(keep)) {
                let l = self.model.forward(&seq[keep..], keep)?;
                self.fed = Some(seq.to_vec());
                return Ok(l);
            }
        }
        let l = self.model.forward(seq, 0)?;
        self.fed = Some(seq.to_vec());
        Ok(l)
    }
}

/// `logprob / len^A`.
fn score(logprob: f64, len: usize, a: f32) -> f64 {
    constrain::sampling::length_normalised(logprob, len, a as f64)
}

/// Log-probabilities of the allowed tokens under the masked distribution at
/// T = 1, as `(token, logprob)`.
fn masked_logprobs(logits: &[f32], m: &Matcher) -> Vec<(TokenId, f64)> {
    let allowed: Vec<(TokenId, f64)> = m
        .allowed()
        .iter()
        .filter_map(|t| {
            let x = *logits.get(t.as_usize())?;
            (!x.is_nan() && x > f32::NEG_INFINITY).then_some((t, x as f64))
        })
        .collect();
    let max = allowed
        .iter()
        .map(|a| a.1)
        .fold(f64::NEG_INFINITY, f64::max);
    let lse = max + allowed.iter().map(|a| (a.1 - max).exp()).sum::<f64>().ln();
    allowed.into_iter().map(|(t, x)| (t, x - lse)).collect()
}

#[derive(Clone)]
struct Hyp {
    tokens: Vec<TokenId>,
    logprob: f64,
    matcher: Matcher,
}

/// Beam search of width `config.beams` from `prompt` under `matcher` (see
/// the module docs). `tokenizer` enables jump-forward for the greedy run.
pub fn beam_search<M: LanguageModel + ?Sized>(
    model: &mut M,
    vocab: &Vocabulary,
    tokenizer: Option<&TextTokenizer>,
    matcher: &Matcher,
    prompt: &[TokenId],
    config: &BeamConfig,
) -> Result<BeamGeneration, GenerateError> {
    if config.beams == 0 {
        return Err(BeamError::ZeroBeams.into());
    }
    if !config.length_penalty.is_finite() {
        return Err(BeamError::LengthPenalty(config.length_penalty).into());
    }
    let a = config.length_penalty;
    // Greedy first: the same loop as --greedy (its checks refuse a bad request).
    let gcfg = GenerateConfig {
        jump_forward: config.jump_forward,
        ..GenerateConfig::greedy(config.max_tokens)
    };
    let mut gm = matcher.clone();
    let g = generate(
        &mut *model,
        vocab,
        tokenizer,
        Some(&mut gm),
        prompt,
        &gcfg,
        &mut |_| {},
    )?;
    let mut stats = g.stats.clone();
    let mut feeder = Feeder {
        model: &mut *model,
        fed: None,
        calls: 0,
    };

    // Score greedy's completion the way beam scores hypotheses (the EOS it
    // picked, if any, included).
    let mut seq = prompt.to_vec();
    let mut m = matcher.clone();
    let mut greedy_lp = 0.0;
    let mut rescore: Vec<TokenId> = g.tokens.clone();
    if let Some(&e) = gm.tokens().last().filter(|&&e| vocab.is_eos(e)) {
        rescore.push(e);
    }
    if config.beams > 1 {
        for &t in &rescore {
            let l = feeder.logits(&seq)?;
            let lp = masked_logprobs(&l, &m)
                .into_iter()
                .find(|&(u, _)| u == t)
                .map_or(f64::NEG_INFINITY, |(_, lp)| lp);
            greedy_lp += lp;
            m.advance(t)?;
            seq.push(t);
        }
    }
    let greedy = Candidate {
        tokens: g.tokens.clone(),
        logprob: greedy_lp,
        score: score(greedy_lp, rescore.len(), a),
        eos: rescore.len() > g.tokens.len(),
    };
    if config.beams == 1 {
        return Ok(BeamGeneration {
            tokens: g.tokens,
            bytes: g.bytes,
            logprob: greedy.logprob,
            score: greedy.score,
            from_greedy: true,
            candidates: vec![greedy.clone()],
            greedy,
            accepted: g.accepted,
            stats,
        });
    }

    let t1 = Instant::now();
    let mut live = vec![Hyp {
        tokens: Vec::new(),
        logprob: 0.0,
        matcher: matcher.clone(),
    }];
    let mut complete: Vec<Candidate> = Vec::new();
    while !live.is_empty() {
        // (parent, token, logprob of the extension)
        let mut ext: Vec<(usize, TokenId, f64)> = Vec::new();
        for (i, h) in live.iter().enumerate() {
            let mut seq = prompt.to_vec();
            seq.extend_from_slice(&h.tokens);
            let l = feeder.logits(&seq)?;
            let remaining = config.max_tokens - h.tokens.len();
            let mut lps = masked_logprobs(&l, &h.matcher);
            lps.retain(|&(t, _)| vocab.is_eos(t) || h.matcher.fits(t, remaining));
            // Only the N best of one parent can be among the N best overall.
            lps.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
            lps.truncate(config.beams);
            ext.extend(lps.into_iter().map(|(t, lp)| (i, t, h.logprob + lp)));
        }
        let len_after = |i: usize| live[i].tokens.len() + 1;
        ext.sort_by(|x, y| {
            score(y.2, len_after(y.0), a)
                .total_cmp(&score(x.2, len_after(x.0), a))
                .then(x.0.cmp(&y.0))
                .then(x.1.cmp(&y.1))
        });
        ext.truncate(config.beams);
        let mut next = Vec::new();
        for (i, t, lp) in ext {
            let h = &live[i];
            let mut tokens = h.tokens.clone();
            let mut matcher = h.matcher.clone();
            matcher.advance(t)?;
            if vocab.is_eos(t) {
                complete.push(Candidate {
                    score: score(lp, tokens.len() + 1, a),
                    tokens,
                    logprob: lp,
                    eos: true,
                });
                continue;
            }
            tokens.push(t);
            if matcher.is_finished() || tokens.len() == config.max_tokens {
                complete.push(Candidate {
                    score: score(lp, tokens.len(), a),
                    tokens,
                    logprob: lp,
                    eos: false,
                });
                continue;
            }
            next.push(Hyp {
                tokens,
                logprob: lp,
                matcher,
            });
        }
        live = next;
        // Hugging Face's stopping heuristic.
        if complete.len() >= config.beams {
            complete.sort_by(|x, y| y.score.total_cmp(&x.score));
            let worst = complete[config.beams - 1].score;
            let best_live = live
                .iter()
                .map(|h| score(h.logprob, h.tokens.len(), a))
                .fold(f64::NEG_INFINITY, f64::max);
            if best_live <= worst {
                break;
            }
        }
    }
    complete.sort_by(|x, y| y.score.total_cmp(&x.score));
    complete.truncate(config.beams);
    stats.model_calls += feeder.calls;
    stats.decode_time += t1.elapsed();
    let best = complete.first().filter(|c| c.score > greedy.score).cloned();
    let from_greedy = best.is_none();
    let (tokens, logprob, score_) = match &best {
        Some(c) => (c.tokens.clone(), c.logprob, c.score),
        None => (greedy.tokens.clone(), greedy.logprob, greedy.score),
    };
    let mut check = matcher.clone();
    check.accept_tokens(&tokens)?;
    stats.generated_tokens = tokens.len();
    Ok(BeamGeneration {
        bytes: vocab.decode(&tokens),
        tokens,
        logprob,
        score: score_,
        from_greedy,
        greedy,
        candidates: complete,
        accepted: check.is_accepting(),
        stats,
    })
}
