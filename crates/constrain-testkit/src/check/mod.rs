//! # Invariant checks shared by the fuzz targets and the tests
//!
//! Each function here states one family of invariants of the index and the
//! guide, checks it against an **independent oracle**, and returns a
//! [`Violation`] (never panics) when it does not hold. The fuzz targets in
//! `fuzz/` and the ordinary tests (`tests/fuzz_regressions.rs`, which replays
//! every committed case under `fuzz/regressions/`) call the *same* functions,
//! so a crash found by the fuzzer becomes a regression test by saving its case.
//!
//! The oracle is deliberately naive: [`Oracle`] explores the byte automaton
//! from its start state and computes by a plain fixpoint which states can still
//! reach acceptance, without looking at the index's live table. A token is
//! expected in a mask exactly when the text so far followed by the token's
//! bytes still has a completion in the language; an EOS id exactly when the
//! text so far is in the language. Checks that need another engine (the
//! `regex` crate matching a finished output in full, `jsonschema` validating
//! it) take that engine as a closure, so this module needs only the library's
//! own dependencies.
//!
//! Invariants checked:
//!
//! * [`check_mask`]: the mask of a state is exactly the oracle's set (text
//!   tokens, EOS, added tokens and ids past the tokenizer never allowed);
//!   `is_allowed`, `next_state` and `allowed` agree; `is_accepting` matches the
//!   oracle; forced bytes are a prefix of every allowed continuation; the
//!   budget bound `tokens_to_accept` can be lowered by one allowed token.
//! * [`check_reachable_states`] (small vocabularies): every state reachable by
//!   allowed tokens passes [`check_mask`] and can still reach acceptance *with
//!   tokens of this vocabulary* (no token-level dead end), and its budget bound
//!   is at least the true fewest number of tokens.
//! * [`check_walk`]: a walk of allowed tokens chosen by the input, ending in
//!   EOS, yields bytes the oracle and the external `full_match` accept, after
//!   which the guide is finished and refuses everything.
//! * [`check_guide_ops`]: an arbitrary sequence of advances (allowed or not)
//!   and rollbacks: `advance` succeeds exactly for the allowed tokens, a
//!   refused advance changes nothing, and `rollback` restores the exact state,
//!   tokens and mask of the earlier step.

use constrain::dfa::{ByteDfa, DfaConfig, DfaError};
use constrain::index::{ByteAutomaton, IndexConfig, IndexError, StateId, TokenIndex, TokenSet};
use constrain::matcher::{Matcher, MatcherError};
use constrain::vocab::{TokenId, Vocabulary};
use std::collections::HashMap;
use std::sync::Arc;

mod cases;
mod gbnf;
mod tags;
pub use cases::*;
pub use gbnf::*;
pub use tags::*;

/// A broken invariant: what broke, and the text that leads there.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} (after {prefix:?})")]
pub struct Violation {
    /// The invariant and the offending values.
    pub what: String,
    /// The text (lossy UTF-8) the guide had produced when it broke.
    pub prefix: String,
}

impl Violation {
    fn new(what: impl Into<String>, prefix: &[u8]) -> Violation {
        Violation {
            what: what.into(),
            prefix: String::from_utf8_lossy(prefix).into_owned(),
        }
    }
}

fn fail<T>(what: impl Into<String>, prefix: &[u8]) -> Result<T, Violation> {
    Err(Violation::new(what, prefix))
}

/// Byte-level oracle over an automaton: which of its states can reach
/// acceptance, computed by a plain fixpoint over everything reachable from
/// the start (independent of the index's own liveness computation).
pub struct Oracle<'a, A: ByteAutomaton> {
    a: &'a A,
    ids: HashMap<A::State, usize>,
    live: Vec<bool>,
}

impl<'a, A: ByteAutomaton> Oracle<'a, A> {
    /// Explores `a`; `None` when it has more than `max_states` reachable states.
    /// One byte per class of [`ByteAutomaton::byte_classes`] is explored
    /// (bytes of a class lead to the same state by that method's contract).
    pub fn new(a: &'a A, max_states: usize) -> Option<Oracle<'a, A>> {
        let classes = a.byte_classes();
        let mut seen = [false; 256];
        let reps: Vec<u8> = (0..=255u8)
            .filter(|&b| !std::mem::replace(&mut seen[classes[b as usize] as usize], true))
            .collect();
        let mut ids: HashMap<A::State, usize> = HashMap::new();
        let mut states = vec![a.start()];
        ids.insert(a.start(), 0);
        let mut succ: Vec<Vec<usize>> = Vec::new();
        let mut i = 0;
        while i < states.len() {
            let s = states[i];
            let mut out = Vec::new();
            if !a.is_dead(s) {
                for &b in &reps {
                    let n = a.next(s, b);
                    let id = match ids.get(&n) {
                        Some(&id) => id,
                        None => {
                            if states.len() >= max_states {
                                return None;
                            }
                            ids.insert(n, states.len());
                            states.push(n);
                            states.len() - 1
                        }
                    };
                    out.push(id);
                }
            }
            succ.push(out);
            i += 1;
        }
        let mut live: Vec<bool> = states
            .iter()
            .map(|&s| !a.is_dead(s) && a.is_accepting(s))
            .collect();
        loop {
            let mut changed = false;
            for s in 0..states.len() {
                if !live[s] && !a.is_dead(states[s]) && succ[s].iter().any(|&t| live[t]) {
                    live[s] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        Some(Oracle { a, ids, live })
    }

    /// The automaton's start state.
    pub fn start(&self) -> A::State {
        self.a.start()
    }

    /// The state after `bytes` from `s`.
    pub fn after(&self, mut s: A::State, bytes: &[u8]) -> A::State {
        for &b in bytes {
            if self.a.is_dead(s) {
                return s;
            }
            s = self.a.next(s, b);
        }
        s
    }

    /// Whether acceptance is reachable from `s`.
    pub fn is_live(&self, s: A::State) -> bool {
        !self.a.is_dead(s) && self.ids.get(&s).is_some_and(|&i| self.live[i])
    }

    /// Whether the text that led to `s` is in the language.
    pub fn is_accepting(&self, s: A::State) -> bool {
        !self.a.is_dead(s) && self.a.is_accepting(s)
    }

    /// Whether the whole of `text` is in the language.
    pub fn accepts(&self, text: &[u8]) -> bool {
        self.is_accepting(self.after(self.start(), text))
    }
}

/// Which ids [`check_mask`] compares against the oracle.
#[derive(Clone, Debug)]
pub enum Ids {
    /// Every id of the logits width.
    All,
    /// These ids (ids past the width are ignored), plus every EOS id.
    Some(Vec<TokenId>),
}

/// Checks the mask of index state `s`, reached by the text `prefix` whose
/// automaton state is `d`, against the oracle. See the module docs.
pub fn check_mask<A: ByteAutomaton>(
    index: &TokenIndex,
    oracle: &Oracle<A>,
    s: StateId,
    d: A::State,
    prefix: &[u8],
    ids: &Ids,
) -> Result<(), Violation> {
    let vocab = index.vocab();
    let width = vocab.logits_width();
    if !oracle.is_live(d) {
        return fail(
            "the index is in a state from which the oracle finds no completion",
            prefix,
        );
    }
    let accepting = oracle.is_accepting(d);
    if index.is_accepting(s) != accepting {
        return fail(
            format!(
                "is_accepting is {} but the oracle says {accepting}",
                index.is_accepting(s)
            ),
            prefix,
        );
    }
    let mask = index.allowed(s);
    if mask.width() != width {
        return fail(
            format!("mask width {} != logits width {width}", mask.width()),
            prefix,
        );
    }
    let expected = |t: TokenId| -> bool {
        match vocab.token_bytes(t) {
            Some(b) if !b.is_empty() => oracle.is_live(oracle.after(d, b)),
            Some(_) => false,
            None => vocab.is_eos(t) && accepting,
        }
    };
    // Over a vocabulary without every single byte the index also drops tokens
    // that cannot be continued *in tokens*; the byte-level oracle then only
    // bounds the mask from above (never a byte-dead token).
    let pruned = index.is_token_pruned();
    let check_one = |t: TokenId| -> Result<(), Violation> {
        let want = expected(t);
        let got = mask.contains(t);
        if got != want && !(pruned && !got) {
            return fail(
                format!(
                    "token {t} ({}) is {} the mask but the oracle says it {}",
                    vocab.describe(t),
                    if got { "in" } else { "not in" },
                    if want {
                        "keeps the text completable"
                    } else {
                        "must be refused"
                    }
                ),
                prefix,
            );
        }
        let next = index.next_state(s, t);
        if next.is_some() != got {
            return fail(
                format!(
                    "next_state({t}) is {next:?} but the mask says allowed = {got} ({})",
                    vocab.describe(t)
                ),
                prefix,
            );
        }
        if vocab.is_eos(t) && want && next != Some(s) {
            return fail(format!("EOS {t} moves the state to {next:?}"), prefix);
        }
        Ok(())
    };
    match ids {
        Ids::All => {
            for i in 0..width {
                check_one(TokenId(i as u32))?;
            }
            // Nothing past the width.
            for t in mask.iter() {
                if t.as_usize() >= width {
                    return fail(format!("mask holds {t} past the width {width}"), prefix);
                }
            }
        }
        Ids::Some(list) => {
            for &t in list.iter().chain(vocab.eos()) {
                if t.as_usize() < width {
                    check_one(t)?;
                }
            }
        }
    }
    if !accepting && mask.is_empty() {
        return fail("a live, non-accepting state allows nothing", prefix);
    }
    Ok(())
}

/// Checks what the guide says about its current state beyond the mask:
/// forced bytes, the budget bound and `is_finished`. `full` walks the whole
/// mask (use it for small vocabularies or sparse masks).
pub fn check_guide_state(guide: &Matcher, prefix: &[u8], full: bool) -> Result<(), Violation> {
    let index = guide.index();
    let vocab = index.vocab();
    let mask = guide.allowed();
    let forced = guide.forced_bytes();
    if !forced.is_empty() {
        if guide.is_accepting() {
            return fail(
                format!("forced bytes {forced:?} in an accepting state"),
                prefix,
            );
        }
        for &e in vocab.eos() {
            if mask.contains(e) {
                return fail("EOS allowed although bytes are forced", prefix);
            }
        }
    }
    let limit = if full { usize::MAX } else { 4096 };
    for t in mask.iter().take(limit) {
        if let Some(b) = vocab.token_bytes(t) {
            let n = b.len().min(forced.len());
            if b[..n] != forced[..n] {
                return fail(
                    format!(
                        "token {t} ({}) is allowed but every continuation must start with {:?}",
                        vocab.describe(t),
                        String::from_utf8_lossy(&forced)
                    ),
                    prefix,
                );
            }
        }
    }
    if let Some(k) = guide.tokens_to_accept() {
        if (k == 0) != guide.is_accepting() {
            return fail(
                format!(
                    "tokens_to_accept is {k} but is_accepting is {}",
                    guide.is_accepting()
                ),
                prefix,
            );
        }
        if k > 0
            && full
            && !mask
                .iter()
                .any(|t| guide.tokens_to_accept_after(t) == Some(k - 1))
        {
            return fail(
                format!(
                    "tokens_to_accept is {k} but no allowed token lowers it to {}",
                    k - 1
                ),
                prefix,
            );
        }
    }
    if guide.is_finished() {
        let text_allowed = mask.iter().any(|t| vocab.token_bytes(t).is_some());
        if text_allowed {
            return fail("is_finished but a text token is allowed", prefix);
        }
    }
    Ok(())
}

/// Figures about a [`check_reachable_states`] run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reachable {
    /// (index state, automaton state) pairs explored.
    pub pairs: usize,
    /// Whether the exploration stopped at its bound.
    pub truncated: bool,
    /// The text leading to a state that allowed tokens reach but from which
    /// no sequence of the vocabulary's tokens reaches acceptance (a
    /// token-level dead end; possible only when the vocabulary lacks bytes).
    pub token_dead_end: Option<String>,
}

/// Explores (by breadth-first search over allowed tokens, at most
/// `max_pairs` states) every index state reachable from the start and checks
/// each one's full mask ([`check_mask`] with [`Ids::All`]), the guide-level
/// facts of [`check_guide_state`], that acceptance stays reachable **with the
/// vocabulary's tokens**, and that the budget bound is never below the true
/// fewest number of tokens. Meant for small vocabularies. A token-level dead
/// end is returned in [`Reachable::token_dead_end`] for the caller to judge.
pub fn check_reachable_states<A: ByteAutomaton>(
    index: &Arc<TokenIndex>,
    oracle: &Oracle<A>,
    max_pairs: usize,
) -> Result<Reachable, Violation> {
    let vocab = index.vocab().clone();
    let start = (index.start(), oracle.start());
    let mut ids: HashMap<(StateId, A::State), usize> = HashMap::new();
    let mut pairs: Vec<(StateId, A::State)> = vec![start];
    let mut prefix_of: Vec<Vec<TokenId>> = vec![Vec::new()];
    let mut succ: Vec<Vec<usize>> = Vec::new();
    ids.insert(start, 0);
    let mut truncated = false;
    let mut i = 0;
    while i < pairs.len() {
        let (s, d) = pairs[i];
        let text = vocab.decode(&prefix_of[i]);
        check_mask(index, oracle, s, d, &text, &Ids::All)?;
        let mut g = Matcher::from_index(index.clone());
        for &t in &prefix_of[i] {
            if let Err(e) = g.advance(t) {
                return fail(format!("replaying an allowed path failed: {e}"), &text);
            }
        }
        if g.state() != s {
            return fail("replaying a path reached another state", &text);
        }
        check_guide_state(&g, &text, true)?;
        let mut out = Vec::new();
        for t in index.allowed(s).iter() {
            let Some(bytes) = vocab.token_bytes(t) else {
                continue;
            };
            let Some(n) = index.next_state(s, t) else {
                return fail(format!("allowed token {t} has no next state"), &text);
            };
            let key = (n, oracle.after(d, bytes));
            let id = match ids.get(&key) {
                Some(&id) => id,
                None => {
                    if pairs.len() >= max_pairs {
                        truncated = true;
                        continue;
                    }
                    ids.insert(key, pairs.len());
                    pairs.push(key);
                    let mut p = prefix_of[i].clone();
                    p.push(t);
                    prefix_of.push(p);
                    pairs.len() - 1
                }
            };
            out.push(id);
        }
        succ.push(out);
        i += 1;
    }
    if truncated {
        return Ok(Reachable {
            pairs: pairs.len(),
            truncated,
            token_dead_end: None,
        });
    }
    // Fewest tokens to acceptance, by a backward fixpoint over the explored graph.
    let n = pairs.len();
    let mut dist: Vec<u32> = pairs
        .iter()
        .map(|&(s, _)| if index.is_accepting(s) { 0 } else { u32::MAX })
        .collect();
    loop {
        let mut changed = false;
        for p in 0..n {
            let best = succ[p]
                .iter()
                .map(|&q| dist[q].saturating_add(1))
                .min()
                .unwrap_or(u32::MAX);
            if best < dist[p] {
                dist[p] = best;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut token_dead_end = None;
    for p in 0..n {
        let text = vocab.decode(&prefix_of[p]);
        if dist[p] == u32::MAX {
            if token_dead_end.is_none() {
                token_dead_end = Some(String::from_utf8_lossy(&text).into_owned());
            }
            continue;
        }
        if let Some(k) = index.tokens_to_accept(pairs[p].0) {
            if k < dist[p] {
                return fail(
                    format!(
                        "tokens_to_accept is {k} but at least {} tokens are needed",
                        dist[p]
                    ),
                    &text,
                );
            }
        }
    }
    Ok(Reachable {
        pairs: n,
        truncated: false,
        token_dead_end,
    })
}

/// How [`check_walk`] walks.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct WalkOptions {
    /// Compare the whole mask with the oracle at every step ([`Ids::All`]);
    /// otherwise only the chosen token and a strided sample.
    pub full_masks: bool,
    /// Stride of the sample when `full_masks` is off.
    pub sample_stride: usize,
    /// Steps after which the walk heads for acceptance (following the budget).
    pub max_steps: usize,
}

constrain::config_setters!(WalkOptions {
    full_masks: bool,
    sample_stride: usize,
    max_steps: usize,
});

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions {
            full_masks: true,
            sample_stride: 61,
            max_steps: 64,
        }
    }
}

/// How a walk ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalkEnd {
    /// EOS was taken; the bytes are the output.
    Finished(Vec<u8>),
    /// The walk could not head for acceptance (no budget bound) and was cut.
    Cut(Vec<u8>),
}

/// Walks the guide from the start, choosing among the allowed tokens with the
/// bytes of `choices` (two per step), then heads for acceptance by following
/// the budget bound and takes EOS. Every step is checked with [`check_mask`]
/// and [`check_guide_state`]; the finished output must be accepted by the
/// oracle *and* by `full_match` (an independent engine, e.g. the `regex`
/// crate), and the guide must then refuse every token.
pub fn check_walk<A: ByteAutomaton>(
    index: &Arc<TokenIndex>,
    oracle: &Oracle<A>,
    choices: &[u8],
    opts: &WalkOptions,
    full_match: &dyn Fn(&[u8]) -> bool,
) -> Result<WalkEnd, Violation> {
    let vocab = index.vocab().clone();
    let width = vocab.logits_width();
    let mut g = Matcher::from_index(index.clone());
    let mut d = oracle.start();
    let mut text: Vec<u8> = Vec::new();
    let mut chooser = choices.chunks(2);
    let hard_limit = opts.max_steps.saturating_mul(4) + 256;
    for step in 0.. {
        let ids = if opts.full_masks {
            Ids::All
        } else {
            let stride = opts.sample_stride.max(1);
            Ids::Some(
                (step % stride..width)
                    .step_by(stride)
                    .map(|i| TokenId(i as u32))
                    .collect(),
            )
        };
        check_mask(index, oracle, g.state(), d, &text, &ids)?;
        check_guide_state(&g, &text, opts.full_masks)?;
        let mask = g.allowed();
        if mask.is_empty() {
            return fail("the guide allows nothing before EOS was taken", &text);
        }
        let eos = vocab.eos().iter().copied().find(|&e| mask.contains(e));
        let pick = match (step < opts.max_steps).then(|| chooser.next()).flatten() {
            Some(c) => {
                let c = c.iter().fold(0usize, |a, &b| a << 8 | b as usize);
                mask.iter().nth(c % mask.len())
            }
            None => match (eos, g.tokens_to_accept()) {
                (Some(e), _) => Some(e),
                (None, Some(k)) => {
                    let t = mask
                        .iter()
                        .find(|&t| g.tokens_to_accept_after(t) == Some(k.saturating_sub(1)));
                    if t.is_none() {
                        return fail(
                            format!("tokens_to_accept is {k} but no allowed token lowers it"),
                            &text,
                        );
                    }
                    t
                }
                (None, None) => {
                    if step >= hard_limit {
                        return Ok(WalkEnd::Cut(text));
                    }
                    mask.iter().next()
                }
            },
        };
        let Some(t) = pick else {
            return fail("choosing from a non-empty mask failed", &text);
        };
        if let Err(e) = g.advance(t) {
            return fail(format!("advance refused allowed token {t}: {e}"), &text);
        }
        if vocab.is_eos(t) {
            break;
        }
        let bytes = vocab.token_bytes(t).unwrap_or_default();
        text.extend_from_slice(bytes);
        d = oracle.after(d, bytes);
    }
    if !g.is_finished() || !g.allowed().is_empty() {
        return fail("after EOS the guide is not finished", &text);
    }
    if g.advance(TokenId(0)) != Err(MatcherError::Finished) {
        return fail("after EOS advance did not answer Finished", &text);
    }
    if !oracle.accepts(&text) {
        return fail(
            "the finished output is not in the automaton's language",
            &text,
        );
    }
    if !full_match(&text) {
        return fail(
            "the finished output is rejected by the independent matcher",
            &text,
        );
    }
    if vocab.decode(&g.tokens()) != text {
        return fail("decoding the tokens does not give the output", &text);
    }
    Ok(WalkEnd::Finished(text))
}

/// One step of [`check_guide_ops`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GuideOp {
    /// Advance with this id (usually not allowed).
    Advance(u32),
    /// Advance with the allowed token at this position of the mask (modulo its size).
    AdvanceAllowed(u32),
    /// Roll back this many tokens (may exceed what was taken).
    Rollback(u32),
    /// Back to the start.
    Reset,
}

/// Runs `ops` on a fresh guide and checks, at every step, that `advance`
/// succeeds exactly for the allowed tokens (and for those the oracle says keep
/// the text completable), that a refused advance changes nothing, and that
/// `rollback` restores the exact state, tokens and mask of the earlier step.
pub fn check_guide_ops<A: ByteAutomaton>(
    index: &Arc<TokenIndex>,
    oracle: &Oracle<A>,
    ops: &[GuideOp],
) -> Result<(), Violation> {
    let vocab = index.vocab().clone();
    let width = vocab.logits_width() as u32;
    let mut g = Matcher::from_index(index.clone());
    // history[i]: (state, automaton state, text length, mask) after i tokens.
    let mut history: Vec<(StateId, A::State, usize, TokenSet)> =
        vec![(g.state(), oracle.start(), 0, g.allowed().clone())];
    let mut text: Vec<u8> = Vec::new();
    for op in ops {
        match *op {
            GuideOp::Advance(_) | GuideOp::AdvanceAllowed(_) => {
                let t = match *op {
                    GuideOp::Advance(id) => TokenId(id % (width + 8)),
                    GuideOp::AdvanceAllowed(k) => {
                        let m = g.allowed();
                        if m.is_empty() {
                            continue;
                        }
                        m.iter().nth(k as usize % m.len()).unwrap_or(TokenId(0))
                    }
                    _ => unreachable!(),
                };
                let was_finished = g.is_finished() && g.allowed().is_empty();
                let in_mask = g.allowed().contains(t);
                if g.is_allowed(t) != in_mask {
                    return fail(
                        format!("is_allowed({t}) disagrees with allowed().contains"),
                        &text,
                    );
                }
                let (s, d, _, _) = history.last().cloned().expect("history starts non-empty");
                let expect = if was_finished {
                    false
                } else {
                    match vocab.token_bytes(t) {
                        Some(b) if !b.is_empty() => oracle.is_live(oracle.after(d, b)),
                        Some(_) => false,
                        None => vocab.is_eos(t) && oracle.is_accepting(d),
                    }
                };
                if in_mask != expect {
                    return fail(
                        format!(
                            "token {t} ({}) in mask = {in_mask}, oracle says {expect}",
                            vocab.describe(t)
                        ),
                        &text,
                    );
                }
                let before = g.steps().len();
                match g.advance(t) {
                    Ok(()) => {
                        if !in_mask {
                            return fail(
                                format!(
                                    "advance took {t} ({}) outside the mask",
                                    vocab.describe(t)
                                ),
                                &text,
                            );
                        }
                        if g.steps().len() != before + 1 {
                            return fail("advance did not record the token", &text);
                        }
                        let bytes = vocab.token_bytes(t).unwrap_or_default();
                        text.extend_from_slice(bytes);
                        let nd = oracle.after(d, bytes);
                        history.push((g.state(), nd, text.len(), g.allowed().clone()));
                    }
                    Err(e) => {
                        if in_mask {
                            return fail(format!("advance refused {t} from the mask: {e}"), &text);
                        }
                        if was_finished && e != MatcherError::Finished {
                            return fail(format!("advance after EOS answered {e}"), &text);
                        }
                        if g.state() != s || g.steps().len() != before {
                            return fail("a refused advance changed the guide", &text);
                        }
                    }
                }
            }
            GuideOp::Rollback(n) => {
                let n = n as usize;
                let taken = g.steps().len();
                let before_state = g.state();
                match g.rollback(n) {
                    Ok(()) if n > taken => {
                        return fail(format!("rollback({n}) of {taken} tokens succeeded"), &text)
                    }
                    Err(_) if n <= taken => {
                        return fail(format!("rollback({n}) of {taken} tokens failed"), &text)
                    }
                    Err(_) => {
                        if g.state() != before_state || g.steps().len() != taken {
                            return fail("a refused rollback changed the guide", &text);
                        }
                    }
                    Ok(()) => {
                        history.truncate(taken - n + 1);
                        let (s, _, len, ref mask) = *history.last().expect("non-empty");
                        text.truncate(len);
                        if g.state() != s {
                            return fail(format!("rollback({n}) did not restore the state"), &text);
                        }
                        if g.steps().len() != taken - n {
                            return fail(format!("rollback({n}) left the wrong tokens"), &text);
                        }
                        if n > 0 && g.allowed() != mask {
                            return fail(format!("rollback({n}) did not restore the mask"), &text);
                        }
                    }
                }
            }
            GuideOp::Reset => {
                g.reset();
                history.truncate(1);
                text.clear();
                if g.state() != history[0].0 || !g.steps().is_empty() {
                    return fail("reset did not return to the start", &text);
                }
                if *g.allowed() != history[0].3 {
                    return fail("reset did not restore the start mask", &text);
                }
            }
        }
        if vocab.decode(&g.tokens()) != text {
            return fail("the guide's tokens do not decode to the text", &text);
        }
    }
    Ok(())
}
