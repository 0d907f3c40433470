//! # Speculative decoding under a constraint
//!
//! A small *draft* model proposes `K` tokens; the *target* model scores all of
//! them in **one** call to [`LanguageModel::forward_all`]; each proposal is
//! kept with probability `min(1, p_t / p_d)`, the first refused one is
//! replaced by a draw from the normalised residual `max(0, p_t − p_d)`, and
//! when all `K` are kept the target's row after the last one gives a
//! **bonus** token for free. The output is distributed exactly as decoding
//! with the target alone (Leviathan et al. 2023, Chen et al. 2023; the math is
//! [`constrain::sampling::verify`], checked by `tests/speculative.rs`). Under
//! greedy decoding both distributions are one-hot, so a proposal is kept
//! exactly when it is the target's argmax and the output is the target's
//! greedy output, token for token.
//!
//! ## The distributions are the ones the plain loop samples from
//!
//! `p_t` and `p_d` are not the raw softmaxes: at each position both are the
//! distribution the plain loop ([`super::generate`]) would draw from there,
//! with the same [`Matcher`] mask, the same sampling pipeline (temperature,
//! top-k/p, min-p, penalties over the output so far, drafted tokens
//! included) and the same **budget rule**: when some allowed token would
//! leave too few of `max_tokens` to finish, the plain loop redraws from the
//! tokens that fit, so the distribution it really samples from is
//! `p(t)·[t fits] + P(no fit)·p'(t)` with `p'` the pipeline over the tokens
//! that fit. Both sides use that, so a draft can never propose a token that
//! breaks the budget, the residual never yields one, and the acceptance test
//! stays exact.
//!
//! ## One matcher, advanced and rolled back
//!
//! The draft proposes under the request's own [`Matcher`]: it advances
//! through the drafted tokens (each position's mask depends on the ones
//! before), then [`Matcher::rollback`]s them all, and verification advances
//! it again through what is kept. Drafting stops early where the plain loop
//! would not sample the next token: after EOS, where the matcher is finished,
//! where the budget is spent, and where a forced continuation follows
//! (jump-forward appends it after the token is taken, exactly as in the plain
//! loop, so that greedy speculative and greedy plain see the same tokens).
//!
//! ## Both models' KV caches
//!
//! Each model remembers what it has read. After a round, each is rewound to
//! the longest prefix it shares with the output ([`LanguageModel::truncate`]);
//! a model that cannot rewind (the trait's default) is fed again from
//! position 0: correct, but it pays a prefill per round. The target reads, in
//! its one verification call, the tokens it has not read yet (the previous
//! round's replacement or bonus token and any forced tokens) followed by the
//! drafted ones, so a round costs `K` draft steps and one target pass over
//! `K + 1` positions. The draft reads one token per proposal: after the
//! round's first pass (the tokens it has not read yet), one single-token
//! pass per further proposal.
//!
//! The draft reads the prompt during prefill (its time is
//! [`SpeculativeStats::draft_prefill_time`], part of the generation's
//! `prefill_time`), so that decode figures compare with the target alone's.
//!
//! ## The matcher's rollback window
//!
//! Drafting advances the matcher through up to `K` proposals and rolls them
//! back, so a matcher whose window ([`Matcher::with_max_rollback`]) is
//! shorter than `K` is refused up front ([`GenerateError::RollbackWindow`]);
//! [`super::Engine::generate_speculative`] makes its matcher with a window
//! of exactly `K`. Whether a forced continuation follows is asked of a copy
//! of the matcher, since a forced stretch can be longer than the window.
//!
//! ## Adaptive draft length
//!
//! Whether drafting pays depends on the machine: a round drafting `k`
//! tokens costs `k` draft passes plus one target pass over `k + 1`
//! positions, and yields `1 + a + ... + a^k` tokens on average at a
//! per-token acceptance rate `a`. On a GPU a pass over `k + 1` positions
//! costs about one step and drafting wins; on a small CPU it costs nearly
//! `k + 1` steps and it cannot. With [`SpeculativeConfig::adaptive`] (the
//! default) each round picks the `k` in `0..=K` with the most expected
//! tokens per second, from moving averages of the measured draft pass and
//! target pass (per number of positions, interpolated where not yet
//! measured) and Laplace's estimate of `a`; `k = 0` is a plain target step
//! (counted in [`SpeculativeStats::plain_steps`]), and after
//! `PROBE_EVERY` = 16 of those in a row one round drafts again, so a change
//! is noticed. The choice never depends on the round's own random draws, so
//! the output distribution stays the target's, and greedy output is the
//! target's greedy output whatever the schedule; a sampled output does then
//! depend on timings, so [`SpeculativeConfig::fixed`] (`--draft-fixed`)
//! always drafts `K` for outputs that depend on the seed alone.
//!
//! ## Tracing
//!
//! [`generate_speculative_traced`] records one [`TraceStep`] per output
//! token: a sampled token's step shows the **target's** raw logits at its
//! position (the verification row it was accepted or replaced from, or the
//! row that gave the bonus token), under the mask of that position, so a
//! greedy trace is the trace of the target alone, step for step.
//!
//! ## What is counted
//!
//! [`SpeculativeStats`]: verification rounds, drafted and accepted tokens
//! (forced tokens are neither), the acceptance rate `A / D`, and the mean
//! accepted length `A / rounds` (draft tokens kept per target pass; each pass
//! also yields one token of its own, the replacement or the bonus); and
//! where the time goes: the draft's passes, the target's passes (with the
//! positions they scored), and the rest (masks, matcher, sampling,
//! acceptance tests), printed by the CLI's summary and by `cargo bench
//! --bench speculative`.

use super::types::{GenerateConfig, GenerateError, Generation, SpeculativeStats};
use super::{check_request, Decoder};
use crate::trace::TraceStep;
use crate::LanguageModel;
use constrain::matcher::Matcher;
use constrain::sampling::{verify, Verdict};
use constrain::vocab::{TextTokenizer, TokenId, Vocabulary};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::time::Instant;

/// How to draft.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SpeculativeConfig {
    /// Most tokens the draft proposes per round, `K >= 1` (default 4).
    pub draft_tokens: usize,
    /// Choose each round's draft length in `0..=K` from measured costs and
    /// the running acceptance rate (see the module docs, "Adaptive draft
    /// length"; default `true`). `false` always drafts `K` (where the output
    /// allows): a sampled output then depends on the seed alone, never on
    /// timings.
    pub adaptive: bool,
}

// `adaptive` is a constructor here ([`SpeculativeConfig::adaptive`]).
constrain::config_setters!(SpeculativeConfig {
    draft_tokens: usize,
});

impl Default for SpeculativeConfig {
    fn default() -> Self {
        SpeculativeConfig {
            draft_tokens: 4,
            adaptive: true,
        }
    }
}

impl SpeculativeConfig {
    /// Always `k` draft tokens per round (no adaptive schedule).
    pub fn fixed(k: usize) -> Self {
        SpeculativeConfig {
            draft_tokens: k,
            adaptive: false,
        }
    }

    /// At most `k` draft tokens per round, the length chosen each round.
    pub fn adaptive(k: usize) -> Self {
        SpeculativeConfig {
            draft_tokens: k,
            adaptive: true,
        }
    }
}

/// Salt that separates the speculative random stream (draft draws and
/// acceptance tests) from the sampler's.
const RNG_SALT: u64 = 0x5bd1_e995_9e37_79b9;

/// What a model has read: kept a prefix of the output by rewinding.
#[derive(Default)]
struct Fed(Vec<TokenId>);

impl Fed {
    /// Rewinds `model` to the longest prefix it shares with `seq`, keeping
    /// at most `seq.len() - 1` tokens when `leave_one` (so that the next
    /// pass yields the logits after the whole of `seq`). A model that cannot
    /// rewind restarts from position 0.
    fn rewind<M: LanguageModel + ?Sized>(
        &mut self,
        model: &mut M,
        seq: &[TokenId],
        leave_one: bool,
    ) {
        let mut keep = self.0.iter().zip(seq).take_while(|(a, b)| a == b).count();
        if leave_one {
            keep = keep.min(seq.len().saturating_sub(1));
        }
        if keep < self.0.len() {
            if keep > 0 && model.truncate(keep) {
                self.0.truncate(keep);
            } else {
                self.0.clear();
            }
        }
    }

    /// Feeds the rest of `seq` (non-empty) in one pass; the logits after it.
    fn forward<M: LanguageModel + ?Sized>(
        &mut self,
        model: &mut M,
        seq: &[TokenId],
    ) -> Result<Vec<f32>, GenerateError> {
        let pos = self.0.len();
        let l = model.forward(&seq[pos..], pos)?;
        self.0.extend_from_slice(&seq[pos..]);
        Ok(l)
    }

    /// Feeds `tokens` in one pass; the logits after each.
    fn forward_all<M: LanguageModel + ?Sized>(
        &mut self,
        model: &mut M,
        tokens: &[TokenId],
    ) -> Result<Vec<Vec<f32>>, GenerateError> {
        let pos = self.0.len();
        let rows = model.forward_all(tokens, pos)?;
        self.0.extend_from_slice(tokens);
        Ok(rows)
    }
}

/// Draws from a sparse distribution with one uniform `u` in `[0, 1)`.
fn draw(d: &[(TokenId, f32)], u: f64) -> Option<TokenId> {
    let total: f64 = d.iter().map(|&(_, w)| w.max(0.0) as f64).sum();
    let target = u * total;
    let mut acc = 0.0;
    let mut last = None;
    for &(t, w) in d.iter().filter(|e| e.1 > 0.0) {
        acc += w as f64;
        last = Some(t);
        if target < acc {
            break;
        }
    }
    last
}

/// [`verify`] on two sparse distributions, over the union of their supports.
fn verify_sparse<R: Rng + ?Sized>(
    target: &[(TokenId, f32)],
    draft: &[(TokenId, f32)],
    drafted: TokenId,
    rng: &mut R,
) -> Result<Verdict, GenerateError> {
    let mut ids: Vec<TokenId> = target.iter().chain(draft).map(|e| e.0).collect();
    ids.sort_unstable();
    ids.dedup();
    let dense = |d: &[(TokenId, f32)]| {
        let mut v = vec![0.0f32; ids.len()];
        for &(t, w) in d {
            if let Ok(i) = ids.binary_search(&t) {
                v[i] = w;
            }
        }
        v
    };
    let local = |t: TokenId| TokenId(ids.binary_search(&t).unwrap_or(ids.len()) as u32);
    let global = |t: TokenId| ids[t.as_usize()];
    Ok(
        match verify(&dense(target), &dense(draft), local(drafted), rng)? {
            Verdict::Accepted(t) => Verdict::Accepted(global(t)),
            Verdict::Replaced(t) => Verdict::Replaced(global(t)),
        },
    )
}

impl Decoder<'_> {
    /// The distribution [`Decoder::pick`] draws from at this step, as sparse
    /// `(token, probability)` in id order, for `logits` (left unchanged),
    /// the output so far followed by `extra` (drafted tokens), and
    /// `remaining` tokens of budget. See the module docs for the budget rule.
    pub(super) fn effective_distribution(
        &mut self,
        logits: &[f32],
        extra: &[TokenId],
        remaining: usize,
    ) -> Result<Vec<(TokenId, f32)>, GenerateError> {
        // The output so far and the drafted tokens (a few hundred bytes).
        let history = [&self.out.tokens[..], extra].concat();
        // The sampler works in place: on a copy, in the buffer `pick` keeps
        // for redraws (not in use between picks), so no step allocates.
        let mut work = std::mem::take(&mut self.original);
        work.clear();
        work.extend_from_slice(logits);
        let p = self.distribution_in(&mut work, logits, &history, remaining);
        self.original = work;
        p
    }

    /// [`Self::effective_distribution`] with `work` a copy of `logits`.
    fn distribution_in(
        &mut self,
        work: &mut [f32],
        logits: &[f32],
        history: &[TokenId],
        remaining: usize,
    ) -> Result<Vec<(TokenId, f32)>, GenerateError> {
        let Some(m) = self.matcher.as_deref() else {
            if self.config.ignore_eos {
                for &e in self.vocab.eos() {
                    work[e.as_usize()] = f32::NEG_INFINITY;
                }
            }
            return Ok(self.sampler.distribution(work, None, history)?);
        };
        let p = self
            .sampler
            .distribution(work, Some(m.allowed()), history)?;
        let budget = super::step::Budget::new(m, remaining);
        if budget.always_fits() {
            return Ok(p);
        }
        // Each candidate's fit is asked once (memoized lookups, but this is
        // the per-position path when the budget is tight).
        let fit: Vec<bool> = p.iter().map(|&(t, _)| budget.fits(t)).collect();
        let unfit: f64 = p
            .iter()
            .zip(&fit)
            .filter(|&(_, &f)| !f)
            .map(|(&(_, w), _)| w as f64)
            .sum();
        if unfit <= 0.0 {
            return Ok(p);
        }
        let viable = budget.viable(logits.len());
        if viable.is_empty() {
            return Err(GenerateError::NoViableToken { remaining });
        }
        work.copy_from_slice(logits);
        let redraw = self.sampler.distribution(work, Some(&viable), history)?;
        let mut merged: BTreeMap<TokenId, f64> = p
            .into_iter()
            .zip(fit)
            .filter(|&(_, f)| f)
            .map(|((t, w), _)| (t, w as f64))
            .collect();
        for (t, w) in redraw {
            *merged.entry(t).or_insert(0.0) += unfit * w as f64;
        }
        Ok(merged.into_iter().map(|(t, w)| (t, w as f32)).collect())
    }

    /// Whether a forced continuation follows now (jump-forward would append
    /// tokens with `room` left). Asked of a copy of the matcher, so that it
    /// needs no rollback (a forced stretch can be longer than the matcher's
    /// rollback window).
    fn forced_follows(&mut self, room: usize) -> Result<bool, GenerateError> {
        let (Some(tok), Some(m)) = (self.tokenizer, self.matcher.as_deref()) else {
            return Ok(false);
        };
        if room == 0 || m.forced_bytes().is_empty() {
            return Ok(false);
        }
        Ok(!m.clone().jump_forward(tok, room)?.is_empty())
    }

    /// The prompt followed by the output so far.
    fn sequence(&self, prompt: &[TokenId]) -> Vec<TokenId> {
        [prompt, &self.out.tokens[..]].concat()
    }
}

/// One round's proposals.
struct Draft {
    tokens: Vec<TokenId>,
    /// The draft's distribution at each proposal.
    dists: Vec<Vec<(TokenId, f32)>>,
    /// Whether the output can go on after the last proposal (so the target
    /// reads it and its row can give a bonus token).
    open_end: bool,
}

/// A plain target step after this many rounds without drafting is followed
/// by one round that drafts again, so the schedule notices when drafting has
/// become worth it (the acceptance rate and the costs are only measured
/// while drafting).
const PROBE_EVERY: usize = 16;

/// The adaptive draft length: picks each round the `k` in `0..=K` that
/// maximises expected tokens per second, from the running acceptance rate
/// and the measured costs of a draft pass and of a target pass over `n`
/// positions (exponential moving averages). See the module docs.
struct Schedule {
    max: usize,
    adaptive: bool,
    /// Seconds of one draft pass (one new token).
    draft: Option<f64>,
    /// Seconds of a target pass over `n` positions, at index `n`.
    target: Vec<Option<f64>>,
    /// Plain steps in a row.
    idle: usize,
}

impl Schedule {
    fn new(spec: &SpeculativeConfig) -> Self {
        Schedule {
            max: spec.draft_tokens,
            adaptive: spec.adaptive,
            draft: None,
            target: vec![None; spec.draft_tokens + 2],
            idle: 0,
        }
    }

    fn ema(slot: &mut Option<f64>, x: f64) {
        *slot = Some(slot.map_or(x, |v| 0.7 * v + 0.3 * x));
    }

    /// Records a draft pass over `n` new tokens.
    fn draft_pass(&mut self, n: usize, secs: f64) {
        if n == 1 {
            Self::ema(&mut self.draft, secs);
        }
    }

    /// Records a target pass over `n` positions.
    fn target_pass(&mut self, n: usize, secs: f64) {
        if let Some(slot) = self.target.get_mut(n) {
            Self::ema(slot, secs);
        }
    }

    /// The cost of a target pass over `n` positions: measured, or
    /// interpolated between the nearest measured sizes (beyond the largest,
    /// proportional to `n`, beyond the smallest, proportional too: optimistic
    /// for small passes, so that they get tried).
    fn target_cost(&self, n: usize) -> Option<f64> {
        if let Some(Some(t)) = self.target.get(n) {
            return Some(*t);
        }
        let below = (1..n).rev().find_map(|i| self.target[i].map(|t| (i, t)));
        let above = (n + 1..self.target.len()).find_map(|i| self.target[i].map(|t| (i, t)));
        match (below, above) {
            (Some((i, a)), Some((j, b))) => Some(a + (b - a) * (n - i) as f64 / (j - i) as f64),
            (Some((i, a)), None) => Some(a * n as f64 / i as f64),
            (None, Some((j, b))) => Some(b * n as f64 / j as f64),
            (None, None) => None,
        }
    }

    /// The draft length for the next round, given the acceptance so far.
    fn next(&mut self, stats: &SpeculativeStats) -> usize {
        if !self.adaptive {
            return self.max;
        }
        let (Some(d), Some(_)) = (self.draft, self.target_cost(1)) else {
            return self.max;
        };
        // Laplace's rule: the per-token acceptance rate.
        let a = (stats.accepted as f64 + 1.0) / (stats.drafted as f64 + 2.0);
        // Expected tokens per second of a round drafting k: k draft passes
        // and one target pass over k + 1 positions yield 1 + a + ... + a^k
        // tokens on average.
        let rate: Vec<f64> = (0..=self.max)
            .map(|k| {
                let tokens = (0..=k).map(|i| a.powi(i as i32)).sum::<f64>();
                let cost = k as f64 * d + self.target_cost(k + 1).unwrap_or(f64::INFINITY);
                tokens / cost.max(1e-12)
            })
            .collect();
        let best_of = |ks: std::ops::RangeInclusive<usize>| {
            ks.max_by(|&x, &y| rate[x].total_cmp(&rate[y]).then(y.cmp(&x)))
        };
        let best = best_of(0..=self.max).unwrap_or(0);
        if best > 0 {
            self.idle = 0;
            return best;
        }
        self.idle += 1;
        if self.idle < PROBE_EVERY {
            return 0;
        }
        self.idle = 0;
        best_of(1..=self.max).unwrap_or(1)
    }
}

/// Generates from `prompt` like [`super::generate`], with `draft` proposing
/// up to `spec.draft_tokens` tokens per round and `target` (the model whose
/// distribution the output follows) verifying them in one
/// [`LanguageModel::forward_all`] call. See the module docs. Errors, beyond
/// [`super::generate`]'s: a draft whose logits width differs from the
/// target's, `draft_tokens == 0`, a draft whose context is too short, a
/// matcher whose rollback window is shorter than `draft_tokens`.
#[allow(clippy::too_many_arguments)]
pub fn generate_speculative<M: LanguageModel + ?Sized, D: LanguageModel + ?Sized>(
    target: &mut M,
    draft: &mut D,
    vocab: &Vocabulary,
    tokenizer: Option<&TextTokenizer>,
    matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    config: &GenerateConfig,
    spec: &SpeculativeConfig,
    on_bytes: &mut dyn FnMut(&[u8]),
) -> Result<Generation, GenerateError> {
    run_speculative(
        target, draft, vocab, tokenizer, matcher, prompt, config, spec, on_bytes, false,
    )
    .map(|(g, _)| g)
}

/// [`generate_speculative`], also recording one [`TraceStep`] per output
/// token ([`crate::trace`]): a sampled token's step shows the **target's**
/// logits at its position (the row of the verification pass it was
/// accepted, replaced or drawn from), so the trace reads as one of the
/// target alone; forced tokens are forced steps. Same output as without the
/// trace (the trace draws nothing from the random source).
#[allow(clippy::too_many_arguments)]
pub fn generate_speculative_traced<M: LanguageModel + ?Sized, D: LanguageModel + ?Sized>(
    target: &mut M,
    draft: &mut D,
    vocab: &Vocabulary,
    tokenizer: Option<&TextTokenizer>,
    matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    config: &GenerateConfig,
    spec: &SpeculativeConfig,
    on_bytes: &mut dyn FnMut(&[u8]),
) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
    run_speculative(
        target, draft, vocab, tokenizer, matcher, prompt, config, spec, on_bytes, true,
    )
}

#[allow(clippy::too_many_arguments)]
fn run_speculative<M: LanguageModel + ?Sized, D: LanguageModel + ?Sized>(
    target: &mut M,
    draft: &mut D,
    vocab: &Vocabulary,
    tokenizer: Option<&TextTokenizer>,
    matcher: Option<&mut Matcher>,
    prompt: &[TokenId],
    config: &GenerateConfig,
    spec: &SpeculativeConfig,
    on_bytes: &mut dyn FnMut(&[u8]),
    trace: bool,
) -> Result<(Generation, Vec<TraceStep>), GenerateError> {
    check_request(target, vocab, matcher.as_deref(), prompt, config)?;
    if spec.draft_tokens == 0 {
        return Err(GenerateError::ZeroDraftTokens);
    }
    if let Some(window) = matcher.as_deref().and_then(Matcher::max_rollback) {
        if window < spec.draft_tokens {
            return Err(GenerateError::RollbackWindow {
                window,
                draft_tokens: spec.draft_tokens,
            });
        }
    }
    if draft.logits_width() != target.logits_width() {
        return Err(GenerateError::SecondModelWidth {
            role: "draft",
            model: target.logits_width(),
            other: draft.logits_width(),
        });
    }
    if prompt.len() + config.max_tokens > draft.context_length() {
        return Err(GenerateError::ContextTooSmall {
            prompt: prompt.len(),
            max_tokens: config.max_tokens,
            context: draft.context_length(),
        });
    }
    let mut d = Decoder::new(vocab, tokenizer, matcher, prompt, config, on_bytes, trace)?;
    // Rounds mask several draft positions and roll back: no one next state
    // is known before a pass, so every mask is computed at its step.
    d.ahead = super::mask_ahead::MaskAhead::new(false);
    let mut rng = StdRng::seed_from_u64(config.seed ^ RNG_SALT);
    let mut stats = SpeculativeStats::default();
    let mut schedule = Schedule::new(spec);
    let t0 = Instant::now();
    let mut held = d.prefill(target, prompt)?;
    let mut dfed = Fed::default();
    if held.is_some() {
        // The draft reads the prompt too, up to its last token (its first
        // round reads that one and proposes): part of the prefill, not of
        // the rounds.
        let seq = d.sequence(prompt);
        let t = Instant::now();
        if seq.len() > 1 {
            dfed.forward(draft, &seq[..seq.len() - 1])?;
        }
        stats.draft_prefill_time = t.elapsed();
    }
    d.out.stats.prefill_time = t0.elapsed();
    let t1 = Instant::now();
    let mut tfed = Fed(d.sequence(prompt));
    if held.is_some() {
        loop {
            let k = schedule.next(&stats);
            let t = Instant::now();
            let proposal = propose(
                &mut d,
                draft,
                &mut dfed,
                prompt,
                k,
                &mut rng,
                &mut stats,
                &mut schedule,
            )?;
            stats.draft_time += t.elapsed();
            let t = Instant::now();
            let go_on = verify_round(
                &mut d,
                target,
                &mut tfed,
                &mut held,
                prompt,
                proposal,
                &mut rng,
                &mut stats,
                &mut schedule,
            )?;
            stats.verify_time += t.elapsed();
            if !go_on {
                break;
            }
        }
    }
    d.out.stats.decode_time = t1.elapsed();
    d.out.stats.speculative = Some(stats);
    Ok(d.finish())
}

/// The draft's proposals for one round: up to `k` tokens, each drawn from
/// the draft's effective distribution, the matcher advanced through them
/// and rolled back. `k == 0` drafts nothing (a plain target step follows).
#[allow(clippy::too_many_arguments)]
fn propose<D: LanguageModel + ?Sized>(
    d: &mut Decoder<'_>,
    draft: &mut D,
    dfed: &mut Fed,
    prompt: &[TokenId],
    k: usize,
    rng: &mut StdRng,
    stats: &mut SpeculativeStats,
    schedule: &mut Schedule,
) -> Result<Draft, GenerateError> {
    let mut p = Draft {
        tokens: Vec::new(),
        dists: Vec::new(),
        open_end: k == 0,
    };
    if k == 0 {
        return Ok(p);
    }
    let seq = d.sequence(prompt);
    dfed.rewind(draft, &seq, true);
    let t = Instant::now();
    let fed = seq.len() - dfed.0.len();
    let mut logits = dfed.forward(draft, &seq)?;
    let dt = t.elapsed();
    stats.draft_model_time += dt;
    schedule.draft_pass(fed, dt.as_secs_f64());
    stats.draft_calls += 1;
    loop {
        let remaining = d.remaining() - p.tokens.len();
        let q = d.effective_distribution(&logits, &p.tokens, remaining)?;
        let x = draw(&q, rng.random()).ok_or(constrain::sampling::SamplingError::AllRemoved)?;
        if let Some(m) = d.matcher.as_deref_mut() {
            m.advance(x)?;
        }
        p.tokens.push(x);
        p.dists.push(q);
        let ends = d.vocab.is_eos(x)
            || d.matcher.as_deref().is_some_and(|m| m.is_finished())
            || remaining == 1
            || d.forced_follows(remaining - 1)?;
        if ends {
            break;
        }
        if p.tokens.len() == k {
            p.open_end = true;
            break;
        }
        let pos = dfed.0.len();
        let t = Instant::now();
        logits = draft.forward(&[x], pos)?;
        let dt = t.elapsed();
        stats.draft_model_time += dt;
        schedule.draft_pass(1, dt.as_secs_f64());
        dfed.0.push(x);
        stats.draft_calls += 1;
    }
    stats.drafted += p.tokens.len();
    if let Some(m) = d.matcher.as_deref_mut() {
        m.rollback(p.tokens.len())?;
    }
    Ok(p)
}

/// Verifies one round's proposals with one target pass and takes what is
/// kept, the replacement or the bonus token; `false` when the output is
/// done. With no proposals, a plain target step.
#[allow(clippy::too_many_arguments)]
fn verify_round<M: LanguageModel + ?Sized>(
    d: &mut Decoder<'_>,
    target: &mut M,
    tfed: &mut Fed,
    held: &mut Option<Vec<f32>>,
    prompt: &[TokenId],
    p: Draft,
    rng: &mut StdRng,
    stats: &mut SpeculativeStats,
    schedule: &mut Schedule,
) -> Result<bool, GenerateError> {
    let k = p.tokens.len();
    let seq = d.sequence(prompt);
    // The target's rows: after the output so far, then after each proposal
    // it reads (all but the last unless the output can go on after it).
    let mut rows = Vec::with_capacity(k + 1);
    match held.take() {
        Some(l) if tfed.0.len() == seq.len() => rows.push(l),
        _ => {
            tfed.rewind(target, &seq, true);
            if tfed.0.is_empty() {
                // Restarted: the prompt and output as one prefill pass.
                rows.push(tfed.forward(target, &seq)?);
                d.out.stats.model_calls += 1;
            }
        }
    }
    let pending = seq.len() - tfed.0.len();
    let mut batch = seq[tfed.0.len()..].to_vec();
    batch.extend_from_slice(&p.tokens[..(k + p.open_end as usize).saturating_sub(1)]);
    if !batch.is_empty() {
        let t = Instant::now();
        if k == 0 {
            // A plain step: only the last row is wanted.
            rows.push(tfed.forward(target, &seq)?);
        } else {
            let r = tfed.forward_all(target, &batch)?;
            rows.extend(r.into_iter().skip(pending.saturating_sub(1)));
        }
        let dt = t.elapsed();
        stats.target_model_time += dt;
        stats.target_positions += batch.len();
        schedule.target_pass(batch.len(), dt.as_secs_f64());
        d.out.stats.model_calls += 1;
    }
    if k == 0 {
        stats.plain_steps += 1;
    } else {
        stats.rounds += 1;
    }
    let mut go_on = true;
    let mut all_kept = true;
    for i in 0..k {
        let remaining = d.remaining();
        let pt = d.effective_distribution(&rows[i], &[], remaining)?;
        let verdict = verify_sparse(&pt, &p.dists[i], p.tokens[i], rng)?;
        d.trace_sampled(&rows[i], verdict.token());
        let kept = matches!(verdict, Verdict::Accepted(_));
        stats.accepted += kept as usize;
        match d.take(verdict.token())? {
            None => go_on = false,
            Some(_) if d.done() => go_on = false,
            Some(taken) => all_kept = kept && taken.len() == 1,
        }
        if !go_on || !all_kept {
            break;
        }
    }
    if go_on && all_kept && p.open_end {
        // Every proposal kept (or none made): the target's row after the
        // last one gives one more token (budget-safe like every pick).
        let mut bonus = rows.pop().expect("a row after the last proposal");
        let raw = d.trace.is_on().then(|| bonus.clone());
        let t = d.pick(&mut bonus)?;
        if let Some(raw) = raw {
            d.trace_sampled(&raw, t);
        }
        match d.take(t)? {
            None => go_on = false,
            Some(_) => go_on = !d.done(),
        }
    }
    if go_on {
        let seq = d.sequence(prompt);
        tfed.rewind(target, &seq, false);
    }
    Ok(go_on)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(adaptive: bool) -> Schedule {
        Schedule::new(&SpeculativeConfig {
            draft_tokens: 4,
            adaptive,
        })
    }

    fn stats(drafted: usize, accepted: usize) -> SpeculativeStats {
        SpeculativeStats {
            drafted,
            accepted,
            ..Default::default()
        }
    }

    #[test]
    fn drafts_k_until_costs_are_measured_and_always_when_fixed() {
        let mut s = schedule(true);
        assert_eq!(s.next(&stats(0, 0)), 4);
        s.draft_pass(1, 0.030);
        assert_eq!(s.next(&stats(4, 0)), 4, "no target pass measured yet");
        let mut f = schedule(false);
        f.draft_pass(1, 1.0);
        f.target_pass(1, 0.001);
        f.target_pass(5, 100.0);
        assert_eq!(f.next(&stats(100, 0)), 4);
    }

    #[test]
    fn drafts_the_most_when_verification_is_cheap_and_acceptance_high() {
        // A GPU-like profile: a pass costs the same over 1 or 5 positions.
        let mut s = schedule(true);
        s.draft_pass(1, 0.010);
        for n in 1..=5 {
            s.target_pass(n, 0.050);
        }
        assert_eq!(s.next(&stats(100, 90)), 4);
        // Low acceptance: fewer drafted tokens pay better.
        let k = s.next(&stats(100, 20));
        assert!((1..4).contains(&k), "{k}");
    }

    #[test]
    fn plain_steps_when_drafting_does_not_pay_with_a_probe_now_and_then() {
        // This CPU's profile: a 0.5B draft step costs 30 ms, a 1.5B step
        // 57 ms, each further verified position 35 ms more.
        let mut s = schedule(true);
        s.draft_pass(1, 0.030);
        s.target_pass(1, 0.057);
        s.target_pass(5, 0.057 + 4.0 * 0.035);
        assert!((s.target_cost(3).unwrap() - (0.057 + 2.0 * 0.035)).abs() < 1e-9);
        let st = stats(100, 57);
        let ks: Vec<usize> = (0..PROBE_EVERY).map(|_| s.next(&st)).collect();
        assert!(ks[..PROBE_EVERY - 1].iter().all(|&k| k == 0), "{ks:?}");
        assert!(ks[PROBE_EVERY - 1] >= 1, "a probe round: {ks:?}");
        assert_eq!(s.next(&st), 0);
    }

    #[test]
    fn unmeasured_pass_sizes_are_interpolated() {
        let mut s = schedule(true);
        assert_eq!(s.target_cost(2), None);
        s.target_pass(2, 0.2);
        assert_eq!(s.target_cost(4), Some(0.4));
        assert_eq!(s.target_cost(1), Some(0.1));
        s.target_pass(4, 0.3);
        assert_eq!(s.target_cost(3), Some(0.25));
        // Moving averages: a new measurement moves the estimate 30 %.
        s.target_pass(4, 0.4);
        assert!((s.target_cost(4).unwrap() - 0.33).abs() < 1e-9);
    }
}
