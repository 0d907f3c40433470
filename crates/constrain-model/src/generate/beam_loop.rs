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
//! ## The model's KV cache: one batched pass per step
//!
//! Greedy's completion is rescored in passes over many positions
//! ([`LanguageModel::forward_all`], rows bitwise those of single steps).
//! The search then steps **all live hypotheses in one batched pass**: the
//! model hands out a [`SequenceBatch`] ([`LanguageModel::sequence_batch`]),
//! sequence `j` follows hypothesis `j`, and after each selection the batch
//! is rearranged (`reorder`, Hugging Face's `_reorder_cache`: a parent with
//! several children is copied, one with a single child moved, one with none
//! dropped) before the chosen tokens go in together. On the 0.5B a step over
//! 4 sequences costs well under 4 single steps (measured in `docs/performance.md`).
//!
//! A model without a batched pass (the default, the scripted test models)
//! steps hypotheses one by one: it rewinds to the longest prefix shared with
//! what was fed last ([`LanguageModel::truncate`]) and feeds only the rest;
//! one that cannot rewind restarts from position 0. [`OneByOne`] forces that
//! path on any model; both paths give the same output (tested on scripted
//! models and on the real 0.5B).
//!
//! ## Tracing
//!
//! [`beam_search_traced`] returns the step trace ([`crate::trace`]) of the
//! output, the winning hypothesis, with the same search and result. Every
//! hypothesis carries its own trail of steps (`step.rs`), extended when the
//! hypothesis is and shared with its siblings up to where they part (a clone
//! copies one pointer; with tracing off it is empty and costs nothing). A
//! step shows the logits the hypothesis was extended from, under its mask,
//! and its `logprob` is exactly the one the search scored, so the trace's
//! `sequence_logprob` is the output's summed log-probability and
//! `score = sequence_logprob / steps^A`, the EOS step counted when one ends
//! the output. When greedy's completion wins, its steps come from the
//! rescoring pass; the tokens its jump-forward appended are forced steps
//! (no logits shown) that keep the log-probability the search gave them,
//! since beam search scores every token. `N = 1` skips that rescoring
//! (its score is then 0) unless a trace is asked for.

use super::step::{Budget, Trail};
use super::types::{BeamError, GenerateConfig, GenerateError, GenerationStats};
use crate::trace::{self, TraceStep};
use crate::{LanguageModel, ModelError, SequenceBatch};
use constrain::matcher::Matcher;
use constrain::vocab::{TextTokenizer, TokenId, Vocabulary};
use std::time::Instant;

/// How to search.
#[derive(Clone, Debug)]
#[non_exhaustive]
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

constrain::config_setters!(BeamConfig {
    beams: usize,
    length_penalty: f32,
    max_tokens: usize,
    jump_forward: bool,
});

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
    /// The best candidate's summed log-probabilities (EOS included when it
    /// ended the output).
    pub logprob: f64,
    /// The best candidate's length-penalized score, `logprob / length^A`.
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

/// [`SequenceBatch`] for a model without a batched pass: sequences are
/// token lists, stepped one by one through a [`Feeder`].
struct Replay<'f, 'm, M: LanguageModel + ?Sized> {
    feeder: &'f mut Feeder<'m, M>,
    seqs: Vec<Vec<TokenId>>,
}

impl<M: LanguageModel + ?Sized> SequenceBatch for Replay<'_, '_, M> {
    fn len(&self) -> usize {
        self.seqs.len()
    }

    fn reorder(&mut self, parents: &[usize]) -> Result<(), ModelError> {
        crate::reorder_batch(&mut self.seqs, parents, Clone::clone)
    }

    fn step(&mut self, tokens: &[TokenId]) -> Result<Vec<Vec<f32>>, ModelError> {
        crate::check_step_width(self.seqs.len(), tokens)?;
        let mut rows = Vec::with_capacity(tokens.len());
        for (seq, &t) in self.seqs.iter_mut().zip(tokens) {
            seq.push(t);
            rows.push(self.feeder.logits(seq)?);
        }
        Ok(rows)
    }
}

/// A model seen without its batched pass: beam search over it steps
/// hypotheses one by one (see the module docs). Everything else is the
/// wrapped model's.
pub struct OneByOne<M>(pub M);

impl<M: LanguageModel> LanguageModel for OneByOne<M> {
    fn forward(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<f32>, ModelError> {
        self.0.forward(tokens, pos)
    }
    fn reset(&mut self) {
        self.0.reset()
    }
    fn logits_width(&self) -> usize {
        self.0.logits_width()
    }
    fn context_length(&self) -> usize {
        self.0.context_length()
    }
    fn truncate(&mut self, len: usize) -> bool {
        self.0.truncate(len)
    }
    fn forward_all(&mut self, tokens: &[TokenId], pos: usize) -> Result<Vec<Vec<f32>>, ModelError> {
        self.0.forward_all(tokens, pos)
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

/// The `n` best extensions of a hypothesis under `m`: allowed tokens that
/// keep the output completable within `remaining` tokens (EOS always
/// does), by log-probability then id. The same as filtering every allowed
/// token and sorting, without sorting the (often ~10^5) allowed tokens:
/// a candidate is checked and placed only when it would rank among the `n`.
fn best_extensions(
    logits: &[f32],
    m: &Matcher,
    vocab: &Vocabulary,
    remaining: usize,
    n: usize,
) -> Vec<(TokenId, f64)> {
    use std::cmp::Ordering;
    let budget = Budget::new(m, remaining);
    let order = |x: &(TokenId, f64), y: &(TokenId, f64)| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0));
    let mut top: Vec<(TokenId, f64)> = Vec::with_capacity(n + 1);
    for c in masked_logprobs(logits, m) {
        if top.len() == n && order(&c, &top[n - 1]) != Ordering::Less {
            continue;
        }
        if !(vocab.is_eos(c.0) || budget.fits(c.0)) {
            continue;
        }
        let at = top.partition_point(|x| order(x, &c) == Ordering::Less);
        top.insert(at, c);
        top.truncate(n);
    }
    top
}

/// The logits after `prompt + tokens[..i]` for each `i < tokens.len()`,
/// handed to `each` in order: the first by rewinding to the prompt's last
/// token (or restarting), the rest in passes of [`RESCORE_CHUNK`] positions.
fn rescore<M: LanguageModel + ?Sized>(
    model: &mut M,
    prompt: &[TokenId],
    tokens: &[TokenId],
    calls: &mut usize,
    each: &mut dyn FnMut(usize, &[f32]) -> Result<(), GenerateError>,
) -> Result<(), GenerateError> {
    if tokens.is_empty() {
        return Ok(());
    }
    let p = prompt.len();
    *calls += 1;
    let first = if p > 1 && model.truncate(p - 1) {
        model.forward(&prompt[p - 1..], p - 1)?
    } else {
        model.forward(prompt, 0)?
    };
    each(0, &first)?;
    let mut pos = p;
    let mut i = 1;
    for chunk in tokens[..tokens.len() - 1].chunks(RESCORE_CHUNK) {
        *calls += 1;
        for row in model.forward_all(chunk, pos)? {
            each(i, &row)?;
            i += 1;
        }
        pos += chunk.len();
    }
    Ok(())
}

/// Positions per rescoring pass (bounds the rows of logits held at once).
const RESCORE_CHUNK: usize = 16;

#[derive(Clone)]
struct Hyp {
    tokens: Vec<TokenId>,
    logprob: f64,
    matcher: Matcher,
    /// Its steps (recording only when tracing).
    trail: Trail,
}

/// The trace step of `t`, taken after `logits` under `m` (`i`-th of its
/// sequence), with `logprob` the log-probability the search scored it with.
/// `forced`: greedy's jump-forward appended it, a forced step (see the
/// module docs, "Tracing").
fn scored_step(
    i: usize,
    logits: &[f32],
    m: &Matcher,
    t: TokenId,
    logprob: f64,
    forced: bool,
    vocab: &Vocabulary,
) -> TraceStep {
    let mut s = if forced {
        trace::forced_step(i, t, vocab)
    } else {
        trace::sampled_step(i, logits, Some(m.allowed()), t, vocab)
    };
    s.logprob = logprob;
    s
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
    search(model, vocab, tokenizer, matcher, prompt, config, false).map(|(b, _)| b)
}

/// [`beam_search`], also returning the output's step trace: the winning
/// hypothesis's steps, each `logprob` the one the search scored (see the
/// module docs, "Tracing"). The search and its result are the same as
/// without the trace, except that `N = 1` then scores greedy's completion
/// (its `logprob` and `score` are otherwise left at 0).
pub fn beam_search_traced<M: LanguageModel + ?Sized>(
    model: &mut M,
    vocab: &Vocabulary,
    tokenizer: Option<&TextTokenizer>,
    matcher: &Matcher,
    prompt: &[TokenId],
    config: &BeamConfig,
) -> Result<(BeamGeneration, Vec<TraceStep>), GenerateError> {
    search(model, vocab, tokenizer, matcher, prompt, config, true)
}

fn search<M: LanguageModel + ?Sized>(
    model: &mut M,
    vocab: &Vocabulary,
    tokenizer: Option<&TextTokenizer>,
    matcher: &Matcher,
    prompt: &[TokenId],
    config: &BeamConfig,
    trace: bool,
) -> Result<(BeamGeneration, Vec<TraceStep>), GenerateError> {
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
    // Traced, greedy's own steps say which of its tokens were forced.
    let (g, gsteps) = super::run(
        &mut *model,
        vocab,
        tokenizer,
        Some(&mut gm),
        prompt,
        &gcfg,
        &mut |_| {},
        trace,
    )?;
    let mut stats = g.stats.clone();

    // Score greedy's completion the way beam scores hypotheses (the EOS it
    // picked, if any, included).
    let mut rescored: Vec<TokenId> = g.tokens.clone();
    if let Some(e) = gm
        .steps()
        .last()
        .copied()
        .flatten()
        .filter(|&e| vocab.is_eos(e))
    {
        rescored.push(e);
    }
    let mut greedy_lp = 0.0;
    let mut gtrail = Trail::new(trace);
    if config.beams > 1 || trace {
        let t0 = Instant::now();
        let mut m = matcher.clone();
        rescore(
            &mut *model,
            prompt,
            &rescored,
            &mut stats.model_calls,
            &mut |i, l| {
                let t = rescored[i];
                let lp = masked_logprobs(l, &m)
                    .into_iter()
                    .find(|&(u, _)| u == t)
                    .map_or(f64::NEG_INFINITY, |(_, lp)| lp);
                greedy_lp += lp;
                if gtrail.is_on() {
                    let forced = gsteps.get(i).is_some_and(|s| s.forced);
                    gtrail.push(scored_step(i, l, &m, t, lp, forced, vocab));
                }
                m.advance(t)?;
                Ok(())
            },
        )?;
        stats.decode_time += t0.elapsed();
    }
    let greedy = Candidate {
        tokens: g.tokens.clone(),
        logprob: greedy_lp,
        score: score(greedy_lp, rescored.len(), a),
        eos: rescored.len() > g.tokens.len(),
    };
    if config.beams == 1 {
        return Ok((
            BeamGeneration {
                tokens: g.tokens,
                bytes: g.bytes,
                logprob: greedy.logprob,
                score: greedy.score,
                from_greedy: true,
                candidates: vec![greedy.clone()],
                greedy,
                accepted: g.accepted,
                stats,
            },
            gtrail.into_steps(),
        ));
    }

    let t1 = Instant::now();
    let p = prompt.len();
    // Sequence j of the batch follows live[j]; it starts one token short of
    // the prompt, whose last token is the first step.
    let mut own = model.sequence_batch(p - 1);
    let batched = own.is_some();
    let mut feeder = Feeder {
        model: &mut *model,
        fed: None,
        calls: 0,
    };
    let mut replay = Replay {
        feeder: &mut feeder,
        seqs: vec![prompt[..p - 1].to_vec()],
    };
    let batch: &mut dyn SequenceBatch = match own.as_mut() {
        Some(b) => b.as_mut(),
        None => &mut replay,
    };
    let mut passes = 1;
    let mut logits = batch.step(&prompt[p - 1..])?;
    let mut live = vec![Hyp {
        tokens: Vec::new(),
        logprob: 0.0,
        matcher: matcher.clone(),
        trail: Trail::new(trace),
    }];
    // Complete hypotheses, with their steps.
    let mut complete: Vec<(Candidate, Trail)> = Vec::new();
    while !live.is_empty() {
        // (parent, token, logprob of the extension, logprob of the token)
        let mut ext: Vec<(usize, TokenId, f64, f64)> = Vec::new();
        for (i, (h, l)) in live.iter().zip(&logits).enumerate() {
            let remaining = config.max_tokens - h.tokens.len();
            // Only the N best of one parent can be among the N best overall.
            let best = best_extensions(l, &h.matcher, vocab, remaining, config.beams);
            ext.extend(best.into_iter().map(|(t, lp)| (i, t, h.logprob + lp, lp)));
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
        // Per hypothesis of `next`: its parent's sequence and its token.
        let mut parents = Vec::new();
        let mut fed = Vec::new();
        for (i, t, lp, own) in ext {
            let h = &live[i];
            let mut tokens = h.tokens.clone();
            let mut trail = h.trail.clone();
            if trail.is_on() {
                trail.push(scored_step(
                    trail.len(),
                    &logits[i],
                    &h.matcher,
                    t,
                    own,
                    false,
                    vocab,
                ));
            }
            let mut matcher = h.matcher.clone();
            matcher.advance(t)?;
            if vocab.is_eos(t) {
                let c = Candidate {
                    score: score(lp, tokens.len() + 1, a),
                    tokens,
                    logprob: lp,
                    eos: true,
                };
                complete.push((c, trail));
                continue;
            }
            tokens.push(t);
            if matcher.is_finished() || tokens.len() == config.max_tokens {
                let c = Candidate {
                    score: score(lp, tokens.len(), a),
                    tokens,
                    logprob: lp,
                    eos: false,
                };
                complete.push((c, trail));
                continue;
            }
            next.push(Hyp {
                tokens,
                logprob: lp,
                matcher,
                trail,
            });
            parents.push(i);
            fed.push(t);
        }
        live = next;
        // Hugging Face's stopping heuristic.
        if complete.len() >= config.beams {
            complete.sort_by(|x, y| y.0.score.total_cmp(&x.0.score));
            let worst = complete[config.beams - 1].0.score;
            let best_live = live
                .iter()
                .map(|h| score(h.logprob, h.tokens.len(), a))
                .fold(f64::NEG_INFINITY, f64::max);
            if best_live <= worst {
                break;
            }
        }
        if live.is_empty() {
            break;
        }
        // All live hypotheses in one pass.
        batch.reorder(&parents)?;
        logits = batch.step(&fed)?;
        passes += 1;
    }
    complete.sort_by(|x, y| y.0.score.total_cmp(&x.0.score));
    complete.truncate(config.beams);
    stats.model_calls += if batched { passes } else { feeder.calls };
    stats.decode_time += t1.elapsed();
    let best = complete
        .first()
        .filter(|c| c.0.score > greedy.score)
        .cloned();
    let from_greedy = best.is_none();
    let (tokens, logprob, score_, trail) = match best {
        Some((c, trail)) => (c.tokens, c.logprob, c.score, trail),
        None => (greedy.tokens.clone(), greedy.logprob, greedy.score, gtrail),
    };
    let mut check = matcher.clone();
    check.accept_tokens(&tokens)?;
    stats.generated_tokens = tokens.len();
    Ok((
        BeamGeneration {
            bytes: vocab.decode(&tokens),
            tokens,
            logprob,
            score: score_,
            from_greedy,
            greedy,
            candidates: complete.into_iter().map(|(c, _)| c).collect(),
            accepted: check.is_accepting(),
            stats,
        },
        trail.into_steps(),
    ))
}
