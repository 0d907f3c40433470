//! The fuzz targets' cases: one type per target (a pattern and a small
//! vocabulary, a walk over the Qwen vocabulary, sampling inputs, a schema),
//! saved as JSON under `fuzz/regressions/<target>/`, and the function that
//! runs every invariant of [`super`] on one case. The fuzz target and the
//! replay test (`tests/fuzz_regressions.rs`) call the same function.

use super::*;

/// A `regex_index` fuzz case: a pattern, a small vocabulary and the walk's
/// choices. Saved as JSON under `fuzz/regressions/regex_index/`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegexIndexCase {
    /// The regex (full-match semantics).
    pub pattern: String,
    /// Text tokens, ids `0..tokens.len()`.
    pub tokens: Vec<Vec<u8>>,
    /// Whether every single byte is added as a token after `tokens`.
    pub all_single_bytes: bool,
    /// EOS ids follow the text tokens (at least one).
    pub eos_count: u8,
    /// Extra ids past the tokenizer (holes in the logits width).
    pub extra_width: u8,
    /// Walk choices (two bytes per step).
    pub choices: Vec<u8>,
}

/// What [`check_regex_index_case`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaseOutcome {
    /// The case was refused with a typed error before any check (a bad or
    /// too-big pattern, an empty language, an incompatible vocabulary).
    Refused(String),
    /// The checks ran and passed.
    Checked {
        /// Index states explored.
        pairs: usize,
        /// A token-level dead end that was tolerated (see
        /// [`check_regex_index_case`]'s `allow_token_dead_ends`).
        token_dead_end: Option<String>,
        /// How the walk ended.
        walk: WalkEnd,
    },
}

/// Limits used for fuzz cases (small, so every case is quick).
pub fn fuzz_dfa_config() -> DfaConfig {
    DfaConfig::default()
        .nfa_size_limit(1 << 20)
        .determinize_size_limit(4 << 20)
        .dfa_size_limit(2 << 20)
        .minimize(false)
        .lazy_states(None)
}

impl RegexIndexCase {
    /// The vocabulary of the case.
    pub fn vocabulary(&self) -> Result<Vocabulary, constrain::VocabError> {
        let mut toks: Vec<(TokenId, Vec<u8>)> = self
            .tokens
            .iter()
            .enumerate()
            .map(|(i, b)| (TokenId(i as u32), b.clone()))
            .collect();
        if self.all_single_bytes {
            let base = toks.len() as u32;
            toks.extend((0..=255u8).map(|b| (TokenId(base + b as u32), vec![b])));
        }
        let n = toks.len() as u32;
        let eos: Vec<TokenId> = (0..self.eos_count.max(1) as u32)
            .map(|k| TokenId(n + k))
            .collect();
        let width = (n as usize) + eos.len() + self.extra_width as usize;
        Vocabulary::new(toks, eos, width)
    }
}

/// Everything `regex_index` checks, for one case: eager and lazy indexes
/// agree; every reachable state's mask matches the oracle; no token-level
/// dead end (unless `allow_token_dead_ends`: a known gap, see below); the
/// walk's output is accepted by `full_match`.
///
/// Known gap: when the vocabulary lacks some single bytes, the index can allow
/// a token after which the text is completable byte-wise but not with this
/// vocabulary's tokens (`a*b` over the tokens `{a}` allows `a` forever). The
/// index reports only states that allow nothing at all. Real byte-level BPE
/// vocabularies (Qwen) hold every byte, so this never happens with them.
pub fn check_regex_index_case(
    case: &RegexIndexCase,
    full_match: &dyn Fn(&[u8]) -> bool,
    allow_token_dead_ends: bool,
) -> Result<CaseOutcome, Violation> {
    let dfa = match ByteDfa::new(&case.pattern, &fuzz_dfa_config()) {
        Ok(d) => d,
        Err(e @ (DfaError::Syntax { .. } | DfaError::TooBig { .. } | DfaError::Build(_))) => {
            return Ok(CaseOutcome::Refused(e.to_string()))
        }
    };
    // The sparse determinizer against regex-automata's dense one.
    if let Ok(reference) = ByteDfa::new_reference(&case.pattern, &fuzz_dfa_config()) {
        if let Some(w) = constrain::dfa::first_difference(&dfa, &reference) {
            return Err(Violation::new(
                format!(
                    "the sparse and the reference DFA differ (sparse accepts: {})",
                    dfa.matches(&w)
                ),
                &w,
            ));
        }
    }
    let vocab = match case.vocabulary() {
        Ok(v) => Arc::new(v),
        Err(e) => return Ok(CaseOutcome::Refused(e.to_string())),
    };
    let Some(oracle) = Oracle::new(&dfa, 20_000) else {
        return Ok(CaseOutcome::Refused(
            "automaton too big for the oracle".into(),
        ));
    };
    let build = |eager: bool| {
        let cfg = IndexConfig::default()
            .eager(eager)
            .threads(1)
            .max_states(20_000);
        TokenIndex::build(&dfa, vocab.clone(), &cfg)
    };
    let (eager, lazy) = (build(true), build(false));
    let (eager, lazy) = match (eager, lazy) {
        (Ok(e), Ok(l)) => (Arc::new(e), Arc::new(l)),
        (Err(e), Err(l)) => {
            let same = std::mem::discriminant(&e) == std::mem::discriminant(&l);
            // Lazy mode checks coverage per state only when a single byte is
            // missing; both must agree that the case is refused.
            if !same && !matches!(e, IndexError::IncompatibleVocabulary { .. }) {
                return fail(
                    format!("eager and lazy builds fail differently: {e} / {l}"),
                    b"",
                );
            }
            if matches!(e, IndexError::EmptyLanguage) && oracle.is_live(oracle.start()) {
                return fail(
                    "build says the language is empty but the oracle finds a word",
                    b"",
                );
            }
            return Ok(CaseOutcome::Refused(e.to_string()));
        }
        (Ok(_), Err(l)) => return fail(format!("eager build succeeds, lazy fails: {l}"), b""),
        (Err(e), Ok(_)) => return fail(format!("lazy build succeeds, eager fails: {e}"), b""),
    };
    if eager.num_states() != lazy.num_states() {
        return fail("eager and lazy indexes have different state counts", b"");
    }
    for s in 0..eager.num_states() as u32 {
        if eager.allowed(StateId(s)) != lazy.allowed(StateId(s)) {
            return fail(format!("eager and lazy masks differ in state {s}"), b"");
        }
    }
    if !oracle.is_live(oracle.start()) {
        return fail(
            "the index built but the oracle finds the language empty",
            b"",
        );
    }
    check_lazy_dfa_index(&eager, &case.pattern, &vocab)?;
    let reach = check_reachable_states(&eager, &oracle, 5_000)?;
    if let (Some(prefix), false) = (&reach.token_dead_end, allow_token_dead_ends) {
        return Err(Violation {
            what: "allowed tokens lead to a state from which no sequence of this vocabulary's tokens reaches acceptance (a token-level dead end)".into(),
            prefix: prefix.clone(),
        });
    }
    if case.all_single_bytes {
        // With every byte spellable the budget bound always exists.
        for s in 0..eager.num_states() as u32 {
            if eager.tokens_to_accept(StateId(s)).is_none() {
                return fail(
                    format!("no budget bound in state {s} although every byte is a token"),
                    b"",
                );
            }
        }
    }
    let walk = check_walk(
        &eager,
        &oracle,
        &case.choices,
        &WalkOptions::default(),
        full_match,
    )?;
    Ok(CaseOutcome::Checked {
        pairs: reach.pairs,
        token_dead_end: reach.token_dead_end,
        walk,
    })
}

/// The index over a lazy DFA (everything past the start determinized on
/// demand) against the eager index of the same pattern: over pairs of states
/// reached by the same bytes (breadth-first, at most 2,000 pairs), the same
/// masks, acceptance, budget bound and forced byte.
fn check_lazy_dfa_index(
    eager: &TokenIndex,
    pattern: &str,
    vocab: &Arc<Vocabulary>,
) -> Result<(), Violation> {
    let cfg = fuzz_dfa_config().lazy_states(Some(1));
    let dfa = match ByteDfa::build(pattern, &cfg) {
        Ok(d) => d,
        Err(e) => {
            return fail(
                format!("the eager DFA builds, the lazy one fails: {e}"),
                b"",
            )
        }
    };
    let icfg = IndexConfig::default().threads(1).max_states(20_000);
    let lazy = match TokenIndex::build_dfa(dfa, vocab.clone(), &icfg) {
        Ok(i) => i,
        Err(e) => {
            return fail(
                format!("the eager index builds, the lazy one fails: {e}"),
                b"",
            )
        }
    };
    type Pair = (StateId, StateId);
    let mut parent: HashMap<Pair, Option<(Pair, u8)>> = HashMap::new();
    let start = (eager.start(), lazy.start());
    parent.insert(start, None);
    let mut queue = std::collections::VecDeque::from([start]);
    let prefix = |parent: &HashMap<_, Option<(_, u8)>>, mut p: (StateId, StateId)| {
        let mut out = Vec::new();
        while let Some(Some((q, b))) = parent.get(&p) {
            out.push(*b);
            p = *q;
        }
        out.reverse();
        out
    };
    while let Some((a, b)) = queue.pop_front() {
        let what = if eager.allowed(a) != lazy.allowed(b) {
            Some("masks")
        } else if eager.is_accepting(a) != lazy.is_accepting(b) {
            Some("acceptance")
        } else if eager.tokens_to_accept(a) != lazy.tokens_to_accept(b) {
            Some("budget bounds")
        } else if eager.forced_byte(a) != lazy.forced_byte(b) {
            Some("forced bytes")
        } else {
            None
        };
        if let Some(what) = what {
            return Err(Violation::new(
                format!("the eager and the lazy-DFA index differ in their {what}"),
                &prefix(&parent, (a, b)),
            ));
        }
        for byte in 0..=255u8 {
            match (
                eager.next_byte_state(a, byte),
                lazy.next_byte_state(b, byte),
            ) {
                (Some(x), Some(y)) => {
                    if parent.len() < 2_000 && !parent.contains_key(&(x, y)) {
                        parent.insert((x, y), Some(((a, b), byte)));
                        queue.push_back((x, y));
                    }
                }
                (None, None) => {}
                _ => {
                    let mut w = prefix(&parent, (a, b));
                    w.push(byte);
                    return Err(Violation::new(
                        "the eager and the lazy-DFA index disagree on a byte's liveness",
                        &w,
                    ));
                }
            }
        }
    }
    if let Some(e) = lazy.lazy_limit_error() {
        return fail(
            format!("the lazy DFA hit a limit the eager one did not: {e}"),
            b"",
        );
    }
    Ok(())
}

/// A `guide_walk` fuzz case: a real pattern over the Qwen vocabulary and a
/// sequence of guide operations. Saved as JSON under
/// `fuzz/regressions/guide_walk/`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GuideWalkCase {
    /// The regex (full-match semantics).
    pub pattern: String,
    /// The operations.
    pub ops: Vec<GuideOp>,
}

/// Checks a [`GuideWalkCase`] against an index built from its pattern (over
/// any vocabulary; the fuzz target and tests use Qwen's) with the pattern's
/// automaton as the oracle: [`check_guide_ops`], then the start mask on the
/// ids the ops name ([`check_mask`]).
pub fn check_guide_walk_case<A: ByteAutomaton>(
    index: &Arc<TokenIndex>,
    oracle: &Oracle<A>,
    case: &GuideWalkCase,
) -> Result<(), Violation> {
    check_guide_ops(index, oracle, &case.ops)?;
    let width = index.vocab().logits_width() as u32 + 8;
    let named: Vec<TokenId> = case
        .ops
        .iter()
        .filter_map(|op| match op {
            GuideOp::Advance(id) => Some(TokenId(id % width)),
            _ => None,
        })
        .collect();
    check_mask(
        index,
        oracle,
        index.start(),
        oracle.start(),
        b"",
        &Ids::Some(named),
    )
}

/// A `sampling` fuzz case. Floats are stored as their bits so NaN and
/// infinities survive JSON. Saved under `fuzz/regressions/sampling/`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SamplingCase {
    /// Logits (`f32::to_bits`).
    pub logits: Vec<u32>,
    /// Allowed ids (`None`: no mask).
    pub mask: Option<Vec<u32>>,
    /// Generated tokens so far (for the penalties).
    pub history: Vec<u32>,
    /// `temperature, top_p, min_p, repetition, frequency, presence` as bits.
    pub knobs: [u32; 6],
    /// The `top_k` setting (0 keeps every token).
    pub top_k: u32,
    /// How many recent tokens the penalties look at; `None` is the whole
    /// history.
    pub penalty_last_n: Option<u32>,
    /// (id, bias bits).
    pub logit_bias: Vec<(u32, u32)>,
    /// Seed of the sampler.
    pub seed: u64,
}

impl SamplingCase {
    /// The sampling config of the case (possibly invalid).
    pub fn config(&self) -> constrain::sampling::SamplingConfig {
        let f = |i: usize| f32::from_bits(self.knobs[i]);
        constrain::sampling::SamplingConfig::default()
            .temperature(f(0))
            .top_k(self.top_k as usize)
            .top_p(f(1))
            .min_p(f(2))
            .repetition_penalty(f(3))
            .frequency_penalty(f(4))
            .presence_penalty(f(5))
            .penalty_last_n(self.penalty_last_n.map(|n| n as usize))
            .logit_bias(
                self.logit_bias
                    .iter()
                    .map(|&(id, b)| (TokenId(id), f32::from_bits(b)))
                    .collect(),
            )
    }
}

/// What [`check_sampling_case`] saw.
#[derive(Clone, Debug, PartialEq)]
pub enum SamplingOutcome {
    /// The config was refused as invalid.
    InvalidConfig,
    /// Sampling answered a typed error (consistent with the inputs).
    Error(String),
    /// A token was picked from a distribution of this many tokens.
    Picked {
        /// The picked token.
        token: TokenId,
        /// Number of tokens with a nonzero probability.
        support: usize,
    },
}

/// Sampling invariants for one case: the picked token is allowed by the mask,
/// not removed (NaN logit, `-inf` bias) and in the support of
/// [`Sampler::distribution`](constrain::sampling::Sampler::distribution) for the
/// same inputs; that distribution has finite probabilities in `(0, 1]`
/// summing to 1, ascending ids, at most `top_k` tokens, none below
/// `min_p × p_max`, one token at probability 1 under greedy; "every token
/// removed" is answered only when no allowed token has a finite logit and
/// bias of moderate size; width and id errors only for such inputs; `sample`
/// and `distribution` agree on success; the same seed gives the same token.
pub fn check_sampling_case(case: &SamplingCase) -> Result<SamplingOutcome, Violation> {
    use constrain::sampling::{Sampler, SamplingError};
    let cfg = case.config();
    let n = case.logits.len();
    let logits: Vec<f32> = case.logits.iter().map(|&b| f32::from_bits(b)).collect();
    let mask = case.mask.as_ref().map(|ids| {
        let mut m = TokenSet::new(n);
        for &i in ids {
            m.insert(TokenId(i));
        }
        m
    });
    let history: Vec<TokenId> = case.history.iter().map(|&i| TokenId(i)).collect();
    let v = |what: String| Violation::new(what, b"");
    let mut sampler = match Sampler::new(cfg.clone(), case.seed) {
        Ok(s) => s,
        Err(SamplingError::InvalidParameter { .. }) => {
            if cfg.validate().is_ok() {
                return Err(v("Sampler::new refused a config validate() accepts".into()));
            }
            return Ok(SamplingOutcome::InvalidConfig);
        }
        Err(e) => return Err(v(format!("Sampler::new failed with {e}"))),
    };
    let allowed = |t: usize| mask.as_ref().is_none_or(|m| m.contains(TokenId(t as u32)));
    // The logit after the bias entries, added one by one as the sampler does.
    let biased = |t: usize| -> f32 {
        cfg.logit_bias
            .iter()
            .filter(|(id, _)| id.as_usize() == t)
            .fold(logits[t], |x, &(_, b)| x + b)
    };
    let removed = |t: usize| {
        let x = biased(t);
        !allowed(t) || x.is_nan() || x == f32::NEG_INFINITY
    };
    // Out-of-range ids must be refused in the logit bias, and in the history
    // when penalties look at them (inside the `penalty_last_n` window);
    // elsewhere in the history they may be ignored.
    let penalties_on = cfg.repetition_penalty != 1.0
        || cfg.frequency_penalty != 0.0
        || cfg.presence_penalty != 0.0;
    let window = cfg.penalty_last_n.map_or(&history[..], |k| {
        &history[history.len().saturating_sub(k)..]
    });
    let bad_ids = cfg.logit_bias.iter().any(|(id, _)| id.as_usize() >= n)
        || (penalties_on && window.iter().any(|t| t.as_usize() >= n));
    let maybe_bad_ids = bad_ids || history.iter().any(|t| t.as_usize() >= n);
    let dist = sampler.distribution(&mut logits.clone(), mask.as_ref(), &history);
    let mut again = Sampler::new(cfg.clone(), case.seed).map_err(|e| v(e.to_string()))?;
    let pick = again.sample(&mut logits.clone(), mask.as_ref(), &history);
    let mut third = Sampler::new(cfg.clone(), case.seed).map_err(|e| v(e.to_string()))?;
    let pick2 = third.sample(&mut logits.clone(), mask.as_ref(), &history);
    if pick != pick2 {
        return Err(v(format!(
            "same seed, different picks: {pick:?} / {pick2:?}"
        )));
    }
    match (&dist, &pick) {
        (Err(a), Err(b)) if a == b => {}
        (Ok(_), Ok(_)) => {}
        _ => {
            return Err(v(format!(
                "distribution and sample disagree: {dist:?} / {pick:?}"
            )))
        }
    }
    let dist = match dist {
        Err(SamplingError::AllRemoved) => {
            // Some allowed token with moderate finite values must survive.
            let moderate = |x: f32| x.is_finite() && x.abs() <= 1e4;
            let penalties_moderate = cfg.repetition_penalty <= 1e4
                && cfg.repetition_penalty >= 1e-4
                && cfg.frequency_penalty.abs() <= 1e4
                && cfg.presence_penalty.abs() <= 1e4
                && history.len() <= 1000
                && (cfg.temperature == 0.0 || cfg.temperature >= 1e-4);
            if penalties_moderate {
                if let Some(t) =
                    (0..n).find(|&t| allowed(t) && moderate(logits[t]) && moderate(biased(t)))
                {
                    return Err(v(format!(
                        "every token reported removed, but token {t} is allowed with logit {} ({} after the bias)",
                        logits[t],
                        biased(t)
                    )));
                }
            }
            return Ok(SamplingOutcome::Error("all removed".into()));
        }
        Err(e @ SamplingError::TokenOutOfRange { .. }) if maybe_bad_ids => {
            return Ok(SamplingOutcome::Error(e.to_string()))
        }
        Err(e) => return Err(v(format!("unexpected sampling error: {e}"))),
        Ok(d) => d,
    };
    if bad_ids {
        return Err(v("an id outside the logits was accepted".into()));
    }
    let token = pick.map_err(|e| v(e.to_string()))?;
    let t = token.as_usize();
    if t >= n || !allowed(t) {
        return Err(v(format!("picked token {t}, which the mask forbids")));
    }
    if removed(t) {
        return Err(v(format!(
            "picked token {t}, which is removed (logit {}, {} after the bias)",
            logits[t],
            biased(t)
        )));
    }
    if !dist.iter().any(|&(id, _)| id == token) {
        return Err(v(format!(
            "picked token {t} outside the distribution {dist:?}"
        )));
    }
    let mut sum = 0f64;
    for (i, &(id, p)) in dist.iter().enumerate() {
        if !(p.is_finite() && p > 0.0 && p <= 1.0 + 1e-6) {
            return Err(v(format!("probability {p} of token {id}")));
        }
        if i > 0 && dist[i - 1].0 >= id {
            return Err(v("distribution ids are not strictly ascending".into()));
        }
        if removed(id.as_usize()) {
            return Err(v(format!("removed token {id} has probability {p}")));
        }
        sum += p as f64;
    }
    if (sum - 1.0).abs() > 1e-3 {
        return Err(v(format!("probabilities sum to {sum}")));
    }
    if cfg.is_greedy() && dist.len() != 1 {
        return Err(v(format!("greedy gave {} tokens", dist.len())));
    }
    if cfg.top_k > 0 && dist.len() > cfg.top_k {
        return Err(v(format!("top_k {} kept {} tokens", cfg.top_k, dist.len())));
    }
    if cfg.min_p > 0.0 {
        let pmax = dist.iter().map(|d| d.1).fold(0f32, f32::max);
        if let Some(&(id, p)) = dist.iter().find(|d| d.1 < cfg.min_p * pmax * (1.0 - 1e-3)) {
            return Err(v(format!(
                "token {id} at {p} survives min_p {} (p_max {pmax})",
                cfg.min_p
            )));
        }
    }
    Ok(SamplingOutcome::Picked {
        token,
        support: dist.len(),
    })
}

/// A small vocabulary for schema checks: every single byte (so every text is
/// spellable and byte-level liveness is token-level liveness) plus a few
/// multi-byte JSON pieces, and two EOS ids.
pub fn json_test_vocabulary() -> Vocabulary {
    let pieces: &[&str] = &[
        "{\"", "\":", "\": ", "\", \"", ", ", "\"}", "true", "false", "null", "[]", "{}", "[{",
        "}]", "\":\"", "0.", "-1", "e+", "\\u00", "\\\"", "ab", "abc",
    ];
    let mut toks: Vec<(TokenId, Vec<u8>)> =
        (0..=255u8).map(|b| (TokenId(b as u32), vec![b])).collect();
    for (i, p) in pieces.iter().enumerate() {
        toks.push((TokenId(256 + i as u32), p.as_bytes().to_vec()));
    }
    let n = toks.len() as u32;
    Vocabulary::new(toks, [TokenId(n), TokenId(n + 1)], n as usize + 2).expect("a valid vocabulary")
}

/// What [`check_schema_case`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SchemaOutcome {
    /// The schema (or its automaton) was refused with a typed error.
    Refused(String),
    /// Walks ran; every finished output validated.
    Checked {
        /// Walks that finished (EOS taken).
        finished: usize,
    },
}

/// Schema invariants for one schema: `compile` never panics and either
/// refuses with a non-empty message or yields a regex the DFA builder parses;
/// the index over `vocab` builds (or refuses for size); `walks` random walks
/// of allowed tokens, each checked by [`check_walk`] (masks against the DFA
/// oracle), end in a text that parses as JSON and that `validate` (an
/// independent JSON Schema validator) accepts. `opts` must not be lenient;
/// `dfa_config` bounds the automaton (a schema over it is refused).
pub fn check_schema_case(
    schema: &serde_json::Value,
    opts: &constrain::schema::SchemaOptions,
    vocab: Arc<Vocabulary>,
    dfa_config: &DfaConfig,
    choices: &[u8],
    walks: usize,
    validate: &dyn Fn(&serde_json::Value) -> bool,
) -> Result<SchemaOutcome, Violation> {
    let compiled = match constrain::schema::compile(schema, opts) {
        Ok(c) => c,
        Err(e) => {
            let msg = e.to_string();
            if msg.trim().is_empty() {
                return fail("the schema compiler refused with an empty message", b"");
            }
            return Ok(SchemaOutcome::Refused(msg));
        }
    };
    let dfa = match ByteDfa::new(&compiled.regex, dfa_config) {
        Ok(d) => d,
        Err(DfaError::Syntax { offset, message }) => {
            return fail(
                format!(
                    "the schema compiler emitted a regex that does not parse (byte {offset}: {message}): {}",
                    compiled.regex
                ),
                b"",
            )
        }
        Err(e) => return Ok(SchemaOutcome::Refused(e.to_string())),
    };
    let cfg = IndexConfig::default().threads(1).max_states(50_000);
    let index = match TokenIndex::build(&dfa, vocab, &cfg) {
        Ok(i) => Arc::new(i),
        Err(e @ IndexError::IncompatibleVocabulary { .. }) => {
            return fail(
                format!("index build failed over a vocabulary with every byte: {e}"),
                b"",
            )
        }
        Err(e) => return Ok(SchemaOutcome::Refused(e.to_string())),
    };
    let Some(oracle) = Oracle::new(&dfa, 50_000) else {
        return Ok(SchemaOutcome::Refused(
            "automaton too big for the oracle".into(),
        ));
    };
    let full = |text: &[u8]| -> bool {
        std::str::from_utf8(text)
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
            .is_some_and(|v| validate(&v))
    };
    let opts = WalkOptions {
        full_masks: index.vocab().logits_width() <= 4096,
        sample_stride: 61,
        max_steps: 48,
    };
    let mut finished = 0;
    for k in 0..walks {
        let mut c = choices.to_vec();
        let len = c.len();
        if len > 0 {
            c.rotate_left((k * 7) % len);
        }
        c.push(k as u8);
        if let WalkEnd::Finished(_) = check_walk(&index, &oracle, &c, &opts, &full)? {
            finished += 1;
        }
    }
    Ok(SchemaOutcome::Checked { finished })
}

/// Schema invariants through the whole pipeline a user calls (a
/// [`constrain::Compiler`] compiling the schema as the output, so the
/// pushdown engine and the run-time `uniqueItems` check take part): the
/// compile never panics and refuses with a non-empty message or yields a
/// matcher; over `walks` walks steered by `choices`, every mask is non-empty,
/// every allowed token is taken, EOS is allowed only where the text parses as
/// JSON and `validate` accepts it, and a known completion exists. Each walk
/// then finishes under the budget its state names ([`Matcher::fits`] with
/// `remaining` = `tokens_to_accept()`): some token always fits, and the text
/// it ends with validates.
pub fn check_compiled_schema_case(
    schema: &serde_json::Value,
    opts: &constrain::schema::SchemaOptions,
    vocab: Arc<Vocabulary>,
    dfa_config: &DfaConfig,
    choices: &[u8],
    walks: usize,
    validate: &dyn Fn(&serde_json::Value) -> bool,
) -> Result<SchemaOutcome, Violation> {
    use constrain::{Compiler, CompilerConfig, Source};
    let config = CompilerConfig::default()
        .dfa(dfa_config.clone())
        .cache_entries(0);
    let source = Source::JsonSchema {
        schema: schema.clone(),
        options: opts.clone(),
    };
    let compiled = match Compiler::new(vocab.clone(), config).compile(&source) {
        Ok(c) => c,
        Err(e) => {
            let msg = e.to_string();
            if msg.trim().is_empty() {
                return fail("the compiler refused with an empty message", b"");
            }
            return Ok(SchemaOutcome::Refused(msg));
        }
    };
    // The validator reads numbers as `f64`: a text with a number past its
    // precision (`1.000…001` under `exclusiveMinimum: 1`) is beyond it,
    // and counts as valid here.
    let valid = |text: &[u8]| -> bool {
        std::str::from_utf8(text)
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
            .is_some_and(|v| validate(&v))
            || beyond_f64(text)
    };
    let mut finished = 0;
    for k in 0..walks {
        let mut picks = choices
            .iter()
            .copied()
            .cycle()
            .skip(k * 7)
            .chain(std::iter::repeat(k as u8));
        let mut m = compiled.matcher();
        let mut text = Vec::new();
        let mut ended = false;
        for _ in 0..48 {
            let allowed: Vec<TokenId> = m.allowed().iter().collect();
            if allowed.is_empty() {
                return fail("an empty mask", &text);
            }
            let stop = allowed.iter().any(|&t| m.is_stop_token(t));
            if stop && !valid(&text) {
                return fail("EOS allowed where the text does not validate", &text);
            }
            let pick = allowed[picks.next().unwrap_or(0) as usize % allowed.len()];
            if m.is_stop_token(pick) {
                ended = true;
                break;
            }
            if !m.accept_token(pick) {
                return fail(format!("allowed token {pick:?} refused"), &text);
            }
            text.extend_from_slice(vocab.token_bytes(pick).unwrap_or_default());
        }
        if ended {
            finished += 1;
            continue;
        }
        // Finish under the budget the state names.
        let Some(need) = m.tokens_to_accept() else {
            if compiled.index().lazy_limit_error().is_some() {
                continue;
            }
            return fail("no known completion from a reached state", &text);
        };
        let mut remaining = need as usize;
        loop {
            if remaining == 0 {
                if !m.is_accepting() {
                    return fail(format!("the budget of {need} tokens ran out"), &text);
                }
                break;
            }
            let fitting: Vec<TokenId> = m
                .allowed()
                .iter()
                .filter(|&t| m.fits(t, remaining))
                .collect();
            if fitting.is_empty() {
                return fail(
                    format!("no token fits the last {remaining} of {need} tokens"),
                    &text,
                );
            }
            let pick = fitting[picks.next().unwrap_or(0) as usize % fitting.len()];
            if m.is_stop_token(pick) {
                break;
            }
            if !m.accept_token(pick) {
                return fail(format!("allowed token {pick:?} refused"), &text);
            }
            text.extend_from_slice(vocab.token_bytes(pick).unwrap_or_default());
            remaining -= 1;
        }
        if !m.is_accepting() || !valid(&text) {
            return fail("a text finished under the budget does not validate", &text);
        }
        finished += 1;
    }
    Ok(SchemaOutcome::Checked { finished })
}

/// Whether `text` (JSON) holds a number with more significant digits than
/// an `f64` keeps (17), outside strings.
fn beyond_f64(text: &[u8]) -> bool {
    let (mut in_string, mut escaped, mut digits) = (false, false, 0usize);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                digits = 0;
            }
            // Leading zeros are not significant.
            b'0' if digits == 0 => {}
            b'0'..=b'9' => {
                digits += 1;
                if digits > 17 {
                    return true;
                }
            }
            b'.' | b'-' | b'+' => {}
            // An exponent's digits are not significant ones.
            _ => digits = 0,
        }
    }
    false
}

/// Both schema checks of the `schema_compile` fuzz target on one case:
/// [`check_schema_case`] (3 walks against the DFA oracle), then
/// [`check_compiled_schema_case`] (2 walks of the compiled matcher).
pub fn check_schema_both_ways(
    schema: &serde_json::Value,
    opts: &constrain::schema::SchemaOptions,
    vocab: Arc<Vocabulary>,
    dfa_config: &DfaConfig,
    choices: &[u8],
    validate: &dyn Fn(&serde_json::Value) -> bool,
) -> Result<(SchemaOutcome, SchemaOutcome), Violation> {
    let regex = check_schema_case(
        schema,
        opts,
        vocab.clone(),
        dfa_config,
        choices,
        3,
        validate,
    )?;
    let compiled = check_compiled_schema_case(
        schema, opts, vocab, dfa_config, choices, 2, validate,
    )
    .map_err(|v| Violation {
        what: format!("through the compiler: {}", v.what),
        ..v
    })?;
    Ok((regex, compiled))
}
