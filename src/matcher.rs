//! # Matcher: the per-request cursor over a shared compiled constraint
//!
//! A [`Matcher`] is what one request holds: a stack of index states (one per
//! token taken, so [`Matcher::rollback`] is a pop) over an `Arc<TokenIndex>`
//! shared by every request ([`Compiled::matcher`](crate::Compiled::matcher)).
//! It is small, `Send`, cheap to create, and allocates nothing per step:
//! [`Matcher::allowed`] returns the index's shared mask for the current state,
//! [`Matcher::fill_bitmask`] copies it into a caller's row, and
//! [`Matcher::accept_token`] walks the token's bytes through the index.
//!
//! ## For serving engines
//!
//! The method names follow XGrammar's `GrammarMatcher`, which vLLM, SGLang
//! and transformers integrations already call: `fill_bitmask` (XGrammar's
//! layout: token `t` is bit `t % 32` of word `t / 32`, 1 = allowed,
//! [`bitmask_words`] words per row), `accept_token`, `accept_tokens`,
//! `validate_tokens` (the longest acceptable prefix, without advancing),
//! `rollback` (up to [`Matcher::with_max_rollback`] tokens), `is_terminated`,
//! `reset`, and jump-forward ([`Matcher::forced_bytes`],
//! [`Matcher::jump_forward`]). [`Matcher::tokens_to_accept`] is the budget
//! logic: how many tokens always suffice to finish from here.
//!
//! ## Invariants
//!
//! * Every state on the stack is live (acceptance is reachable).
//! * A token is accepted exactly when it is in `allowed()` (and set in the
//!   bitmask); a refused token changes nothing.
//! * Stop tokens (EOS) are allowed exactly where the text is complete; once
//!   one is taken the matcher is terminated and allows nothing (its bitmask
//!   row is all zeros) until `rollback` or `reset`.
//! * The stop tokens are the vocabulary's EOS set unless the matcher was
//!   given its own ([`Matcher::with_stop_tokens`], XGrammar's
//!   `override_stop_tokens`): then exactly those ids stop, the vocabulary's
//!   EOS ids are refused, and [`Matcher::fill_bitmask`] and every step say
//!   so. ([`Matcher::allowed`] is the index's shared set and still names the
//!   vocabulary's EOS set.)

use crate::index::{StateId, TokenBudget, TokenIndex, TokenSet};
use crate::region::Region;
use crate::unique::UniqueRun;
use crate::vocab::TokenId;
#[cfg(feature = "tokenizers")]
use crate::vocab::{TextTokenizer, VocabError};
use std::sync::{Arc, OnceLock};

/// Why the matcher refused a step.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MatcherError {
    /// The token is not in the current mask.
    #[error("token {token} ({text}) is not allowed after {position} tokens")]
    NotAllowed {
        /// The refused token.
        token: TokenId,
        /// A printable form of it ([`Vocabulary::describe`](crate::Vocabulary::describe)).
        text: String,
        /// How many tokens had been accepted before it.
        position: usize,
    },
    /// A token after the output was terminated by a stop token.
    #[error("the output is finished: no token may follow end-of-sequence")]
    Finished,
    /// A rollback of more tokens than can be undone.
    #[error("cannot roll back {requested} tokens: only {available} can be undone (Matcher::with_max_rollback)")]
    Rollback {
        /// Tokens asked to be undone.
        requested: usize,
        /// Tokens that can be undone now (at most the
        /// [`Matcher::with_max_rollback`] bound).
        available: usize,
    },
    /// A bitmask row shorter than the vocabulary's logits width needs.
    #[error(
        "bitmask row has {got} words but the vocabulary needs {needed} (ceil(logits width / 32))"
    )]
    BitmaskSize {
        /// The row's length, in 32-bit words.
        got: usize,
        /// The words needed ([`bitmask_words`] of the logits width).
        needed: usize,
    },
    /// A stop token at or past the logits width.
    #[error("stop token {token} is past the logits width {width}")]
    StopToken {
        /// The offending id.
        token: TokenId,
        /// The vocabulary's logits width.
        width: usize,
    },
}

/// Words of one bitmask row for a logits width: `ceil(width / 32)`.
pub fn bitmask_words(logits_width: usize) -> usize {
    logits_width.div_ceil(32)
}

/// Per-request state over a shared [`TokenIndex`].
#[derive(Clone, Debug)]
pub struct Matcher {
    index: Arc<TokenIndex>,
    /// `states[0]` is the oldest state that can be rolled back to;
    /// `states[i + 1]` follows `tokens[i]`.
    states: Vec<StateId>,
    tokens: Vec<Option<TokenId>>,
    /// Tokens taken before `tokens[0]` (dropped when rollback is bounded).
    dropped: usize,
    terminated: bool,
    max_rollback: Option<usize>,
    /// Stop tokens replacing the vocabulary's EOS set (sorted, deduplicated,
    /// each below the logits width).
    stop: Option<Arc<[TokenId]>>,
    /// The index's token budget ([`TokenBudget`]), if any; then
    /// `regions[i]` is where `states[i]` stands with respect to it.
    budget: Option<Arc<TokenBudget>>,
    regions: Vec<Region>,
    /// The mask of the current state once the budget is spent (made on
    /// first use).
    closing: OnceLock<TokenSet>,
    /// The run-time `uniqueItems` check, where the index has checked
    /// arrays ([`crate::unique`]).
    unique: Option<Box<UniqueRun>>,
}

impl Matcher {
    /// A matcher at the start state of `index`, with unbounded rollback.
    pub fn from_index(index: Arc<TokenIndex>) -> Matcher {
        let start = index.start();
        let budget = index.token_budget().cloned();
        let regions = budget.iter().map(|b| b.start()).collect();
        let index_unique = index
            .unique_items()
            .map(|u| Box::new(UniqueRun::new(u.clone())));
        Matcher {
            index,
            states: vec![start],
            tokens: Vec::new(),
            dropped: 0,
            terminated: false,
            max_rollback: None,
            stop: None,
            budget,
            regions,
            closing: OnceLock::new(),
            unique: index_unique,
        }
    }

    /// Stops on exactly `stop` instead of the vocabulary's EOS set
    /// (XGrammar's `override_stop_tokens`): each is allowed where the text is
    /// complete, the vocabulary's own EOS ids never. Ids at or past the
    /// logits width are an error.
    pub fn with_stop_tokens(
        mut self,
        stop: impl IntoIterator<Item = TokenId>,
    ) -> Result<Matcher, MatcherError> {
        let width = self.index.vocab().logits_width();
        let mut ids: Vec<TokenId> = stop.into_iter().collect();
        if let Some(&bad) = ids.iter().find(|t| t.as_usize() >= width) {
            return Err(MatcherError::StopToken { token: bad, width });
        }
        ids.sort_unstable();
        ids.dedup();
        self.stop = Some(ids.into());
        Ok(self)
    }

    /// Whether `t` ends the output for this matcher.
    #[inline]
    pub fn is_stop_token(&self, t: TokenId) -> bool {
        match &self.stop {
            Some(s) => s.binary_search(&t).is_ok(),
            None => self.index.vocab().is_eos(t),
        }
    }

    /// The state after `t` from `s`, and whether `t` stops; `None` when `t`
    /// is not allowed there.
    #[inline]
    fn step(&self, s: StateId, t: TokenId) -> Option<(StateId, bool)> {
        match &self.stop {
            None => self
                .index
                .next_state(s, t)
                .map(|n| (n, self.index.vocab().is_eos(t))),
            Some(stop) if stop.binary_search(&t).is_ok() => {
                self.index.is_accepting(s).then_some((s, true))
            }
            Some(_) if self.index.vocab().is_eos(t) => None,
            Some(_) => self.index.next_state(s, t).map(|n| (n, false)),
        }
    }

    /// Keeps only what `rollback` of at most `n` tokens needs, so a long
    /// request holds O(n) memory (XGrammar's `max_rollback_tokens`; default
    /// unbounded).
    pub fn with_max_rollback(mut self, n: usize) -> Matcher {
        self.max_rollback = Some(n);
        self.trim();
        self
    }

    /// The rollback bound set by [`Matcher::with_max_rollback`] (`None`:
    /// unbounded).
    pub fn max_rollback(&self) -> Option<usize> {
        self.max_rollback
    }

    /// The shared index.
    pub fn index(&self) -> &Arc<TokenIndex> {
        &self.index
    }

    /// The current state.
    #[inline]
    pub fn state(&self) -> StateId {
        *self.states.last().unwrap_or(&self.index.start())
    }

    /// The steps that can still be rolled back (all steps taken, EOS
    /// included, unless rollback is bounded): the token, or `None` for text
    /// taken by [`Matcher::accept_bytes`].
    pub fn steps(&self) -> &[Option<TokenId>] {
        &self.tokens
    }

    /// The tokens among [`Matcher::steps`], in order (text steps left out).
    pub fn tokens(&self) -> Vec<TokenId> {
        self.tokens.iter().flatten().copied().collect()
    }

    /// Number of tokens taken since the start (EOS included).
    pub fn num_tokens(&self) -> usize {
        self.dropped + self.tokens.len()
    }

    /// The allowed tokens now (stop tokens exactly when the text is complete;
    /// empty once terminated).
    #[inline]
    pub fn allowed(&self) -> &TokenSet {
        if self.terminated {
            return self.index.empty_set();
        }
        let base = self
            .closing_set()
            .unwrap_or_else(|| self.index.allowed(self.state()));
        self.unique_set(base).unwrap_or(base)
    }

    /// The allowed set narrowed by the `uniqueItems` check, where it
    /// narrows anything.
    fn unique_set(&self, base: &TokenSet) -> Option<&TokenSet> {
        self.unique
            .as_ref()?
            .filtered(&self.index, self.state(), base)
    }

    /// Whether the `uniqueItems` check lets `t` follow the current state.
    fn unique_admits(&self, t: TokenId) -> bool {
        if self.unique.is_none() {
            return true;
        }
        let base = self
            .closing_set()
            .unwrap_or_else(|| self.index.allowed(self.state()));
        self.unique_set(base).is_none_or(|u| u.contains(t))
    }

    /// Once the token budget is spent in the region: the tokens that go
    /// on to close it ([`TokenBudget`]).
    fn closing_set(&self) -> Option<&TokenSet> {
        let budget = self.budget.as_ref()?;
        let rest = budget.closing(self.regions.last()?)?;
        Some(self.closing.get_or_init(|| {
            TokenBudget::narrow(&rest, self.index.allowed(self.state()), self.index.vocab())
        }))
    }

    /// Whether the token budget lets `t` follow `s` in `region`.
    fn budget_admits(&self, s: StateId, region: Option<&Region>, t: TokenId) -> bool {
        match (&self.budget, region) {
            (Some(b), Some(r)) => b.admits(r, t, self.index.allowed(s), self.index.vocab()),
            _ => true,
        }
    }

    /// The region after `t` (or `bytes`) from the current one.
    fn next_region(&self, bytes: &[u8], token: bool) -> Option<Region> {
        let b = self.budget.as_ref()?;
        Some(b.step(self.regions.last()?, bytes, token))
    }

    /// Whether `t` is allowed now: [`Matcher::allowed`]`().contains(t)`,
    /// without the bitset a small mask of a lazy index is otherwise made
    /// into (for a caller that tests a token, not one that masks logits).
    #[inline]
    pub fn allows(&self, t: TokenId) -> bool {
        if self.terminated {
            return false;
        }
        let ok = match self.closing_set() {
            Some(c) => c.contains(t),
            None => self.index.allows(self.state(), t),
        };
        ok && self.unique_admits(t)
    }

    /// Writes the allowed tokens into `row` in XGrammar's layout (token `t`
    /// is bit `t % 32` of `row[t / 32]`, 1 = allowed). `row` must have at
    /// least [`bitmask_words`]`(logits width)` words; words past that are
    /// left alone.
    pub fn fill_bitmask(&self, row: &mut [u32]) -> Result<(), MatcherError> {
        let needed = bitmask_words(self.index.vocab().logits_width());
        if row.len() < needed {
            return Err(MatcherError::BitmaskSize {
                got: row.len(),
                needed,
            });
        }
        let row = &mut row[..needed];
        let closing = self.closing_set();
        let narrowed = match (&self.unique, self.terminated) {
            (Some(_), false) => {
                let base = closing.unwrap_or_else(|| self.index.allowed(self.state()));
                self.unique_set(base)
            }
            _ => None,
        };
        if self.terminated {
            row.fill(0);
        } else if let Some(c) = narrowed.or(closing) {
            for (i, w) in row.iter_mut().enumerate() {
                *w = (c.words()[i / 2] >> (32 * (i % 2))) as u32;
            }
        } else {
            self.index.fill_row(self.state(), row);
        }
        if let Some(stop) = &self.stop {
            // A stop id is a stop and nothing else (as `step` takes it),
            // even where the index would allow it as text.
            for &e in self.index.vocab().eos().iter().chain(stop.iter()) {
                row[e.as_usize() / 32] &= !(1u32 << (e.0 % 32));
            }
            if !self.terminated && closing.is_none() && narrowed.is_none() && self.is_accepting() {
                for &t in stop.iter() {
                    row[t.as_usize() / 32] |= 1u32 << (t.0 % 32);
                }
            }
        }
        Ok(())
    }

    /// Whether `t` may be taken now.
    #[inline]
    pub fn is_allowed(&self, t: TokenId) -> bool {
        !self.terminated
            && self.step(self.state(), t).is_some()
            && self.closing_set().is_none_or(|c| c.contains(t))
            && self.unique_admits(t)
    }

    /// Takes token `t`. A disallowed token is an error and changes nothing.
    pub fn advance(&mut self, t: TokenId) -> Result<(), MatcherError> {
        if self.terminated {
            return Err(MatcherError::Finished);
        }
        let step = self
            .step(self.state(), t)
            .filter(|_| self.closing_set().is_none_or(|c| c.contains(t)))
            .filter(|_| self.unique_admits(t));
        match step {
            Some((next, stop)) => {
                if let Some(u) = &mut self.unique {
                    let bytes = self.index.vocab().spelling(t).unwrap_or(&[]);
                    let after = u.after(u.current(), if stop { &[] } else { bytes });
                    u.push(after.unwrap_or_else(|| u.current().clone()));
                }
                if self.budget.is_some() {
                    let bytes = self.index.vocab().spelling(t).unwrap_or(&[]);
                    if let Some(r) = self.next_region(bytes, true) {
                        self.regions.push(r);
                    }
                }
                self.closing = OnceLock::new();
                self.terminated = stop;
                self.states.push(next);
                self.tokens.push(Some(t));
                self.trim();
                Ok(())
            }
            None => Err(MatcherError::NotAllowed {
                token: t,
                text: self.index.vocab().describe(t),
                position: self.num_tokens(),
            }),
        }
    }

    /// Takes token `t` if it is allowed: `true` when taken, `false` (and no
    /// change) otherwise. XGrammar's `accept_token`.
    pub fn accept_token(&mut self, t: TokenId) -> bool {
        self.advance(t).is_ok()
    }

    /// Takes all of `tokens`, or none: at the first refused token the ones
    /// already taken are undone and the refusal is returned.
    pub fn accept_tokens(&mut self, tokens: &[TokenId]) -> Result<(), MatcherError> {
        let n = self.validate_tokens(tokens);
        if let Some(&t) = tokens.get(n) {
            let after_stop = self.terminated || n > 0 && self.is_stop_token(tokens[n - 1]);
            return Err(if after_stop {
                MatcherError::Finished
            } else {
                MatcherError::NotAllowed {
                    token: t,
                    text: self.index.vocab().describe(t),
                    position: self.num_tokens() + n,
                }
            });
        }
        tokens.iter().try_for_each(|&t| self.advance(t))
    }

    /// The number of leading `tokens` that would be accepted one after the
    /// other, without taking any (for speculative decoding: how much of a
    /// draft is valid).
    pub fn validate_tokens(&self, tokens: &[TokenId]) -> usize {
        if self.terminated {
            return 0;
        }
        let mut s = self.state();
        let mut region = self.regions.last().cloned();
        let mut scan = self.unique.as_ref().map(|u| u.current().clone());
        for (i, &t) in tokens.iter().enumerate() {
            if !self.budget_admits(s, region.as_ref(), t) {
                return i;
            }
            let step = self.step(s, t);
            if let (Some(u), Some(sc), Some((_, false))) = (&self.unique, &mut scan, step) {
                let bytes = self.index.vocab().spelling(t).unwrap_or(&[]);
                if !u.token_ok(&self.index, s, sc, t) {
                    return i;
                }
                match u.after(sc, bytes) {
                    Some(next) => *sc = next,
                    None => return i,
                }
            }
            match step {
                Some((_, true)) => return i + 1,
                Some((n, false)) => s = n,
                None => return i,
            }
            if let (Some(b), Some(r)) = (&self.budget, &region) {
                region = Some(b.step(r, self.index.vocab().spelling(t).unwrap_or(&[]), true));
            }
        }
        tokens.len()
    }

    /// Takes `text` as one step that is no token (XGrammar's
    /// `accept_string`: forced text, jump-forward): `true` when every byte
    /// can follow, `false` (and no change) otherwise. `rollback(1)` undoes
    /// it; [`Matcher::steps`] lists it as `None`. Empty
    /// text is accepted and adds no step.
    pub fn accept_bytes(&mut self, text: &[u8]) -> bool {
        if self.terminated {
            return false;
        }
        if text.is_empty() {
            return true;
        }
        let mut s = self.state();
        for &b in text {
            match self.index.next_byte_state(s, b) {
                Some(n) => s = n,
                None => return false,
            }
        }
        if let Some(u) = &mut self.unique {
            let from = self.states.last().copied().unwrap_or(s);
            if !u.bytes_ok(&self.index, from, u.current(), text) {
                return false;
            }
            match u.after(u.current(), text) {
                Some(next) => u.push(next),
                None => return false,
            }
        }
        if let Some(r) = self.next_region(text, false) {
            self.regions.push(r);
        }
        self.closing = OnceLock::new();
        self.states.push(s);
        self.tokens.push(None);
        self.trim();
        true
    }

    /// Whether the text so far is in the language.
    #[inline]
    pub fn is_accepting(&self) -> bool {
        self.index.is_accepting(self.state())
    }

    /// Whether a stop token has been taken (XGrammar's `is_terminated`).
    pub fn is_terminated(&self) -> bool {
        self.terminated
    }

    /// Whether nothing may follow: a stop token was taken, or the text is
    /// complete and no text token can extend it.
    pub fn is_finished(&self) -> bool {
        if self.terminated {
            return true;
        }
        let s = self.state();
        self.index.is_accepting(s)
            && self.index.bytes_to_accept(s) == 0
            && !self.index.has_text_continuation(s)
    }

    /// Undoes the last `n` tokens (a stop token included).
    pub fn rollback(&mut self, n: usize) -> Result<(), MatcherError> {
        let available = self
            .max_rollback
            .map_or(self.tokens.len(), |k| k.min(self.tokens.len()));
        if n > available {
            return Err(MatcherError::Rollback {
                requested: n,
                available,
            });
        }
        if n > 0 {
            self.tokens.truncate(self.tokens.len() - n);
            self.states.truncate(self.states.len() - n);
            if self.budget.is_some() {
                self.regions.truncate(self.regions.len() - n);
                self.closing = OnceLock::new();
            }
            if let Some(u) = &mut self.unique {
                u.scans.truncate(u.scans.len() - n);
                u.moved();
            }
            self.terminated = false;
        }
        Ok(())
    }

    /// Back to the start state.
    pub fn reset(&mut self) {
        self.states.clear();
        self.states.push(self.index.start());
        self.tokens.clear();
        self.regions = self.budget.iter().map(|b| b.start()).collect();
        self.closing = OnceLock::new();
        if let Some(u) = &mut self.unique {
            **u = UniqueRun::new(u.spec().clone());
        }
        self.dropped = 0;
        self.terminated = false;
    }

    /// With bounded rollback, forgets states older than the bound (in
    /// batches, so each step stays O(1) amortized).
    fn trim(&mut self) {
        if let Some(k) = self.max_rollback {
            if self.tokens.len() > 2 * k + 64 {
                let cut = self.tokens.len() - k;
                self.tokens.drain(..cut);
                self.states.drain(..cut);
                if self.budget.is_some() {
                    self.regions.drain(..cut);
                }
                if let Some(u) = &mut self.unique {
                    u.scans.drain(..cut);
                }
                self.dropped += cut;
            }
        }
    }

    /// A number of tokens that always suffices to reach acceptance from here
    /// (an upper bound on the fewest; 0 when the text is complete). `None`
    /// when the vocabulary cannot spell the shortest completion.
    pub fn tokens_to_accept(&self) -> Option<u32> {
        if self.terminated {
            return Some(0);
        }
        let n = self.index.tokens_to_accept(self.state())?;
        Some(n + self.unique_slack())
    }

    /// Tokens the `uniqueItems` check may cost beyond the index's bound:
    /// a shortest completion may repeat an item ([`crate::unique`]).
    fn unique_slack(&self) -> u32 {
        self.unique.as_ref().map_or(0, |u| u.current().slack())
    }

    /// [`Matcher::tokens_to_accept`] after taking `t`; `None` when `t` is not
    /// allowed (or the bound is unknown).
    pub fn tokens_to_accept_after(&self, t: TokenId) -> Option<u32> {
        if self.terminated {
            return None;
        }
        let (next, stop) = self.step(self.state(), t)?;
        if stop {
            return Some(0);
        }
        let n = self.index.tokens_to_accept(next)?;
        let slack = self.unique.as_ref().map_or(0, |u| {
            let bytes = self.index.vocab().spelling(t).unwrap_or(&[]);
            u.after(u.current(), bytes).map_or(0, |s| s.slack())
        });
        Some(n + slack)
    }

    /// Whether taking `t` with `remaining` tokens left (counting `t`) still
    /// leaves room to reach acceptance: the budget check that keeps
    /// `max_tokens` from cutting a structure in half. A stop token always
    /// fits; an unknown bound is given the benefit of the doubt.
    pub fn fits(&self, t: TokenId, remaining: usize) -> bool {
        if self.is_stop_token(t) {
            return true;
        }
        match self.tokens_to_accept_after(t) {
            Some(after) => (after as usize) < remaining,
            None => true,
        }
    }

    /// Whether every allowed token fits `remaining` tokens
    /// ([`Matcher::fits`]), known without looking at any: the index's largest
    /// budget is below it. A generation loop then needs no copy of the
    /// logits for a budget redraw.
    pub fn always_fits(&self, remaining: usize) -> bool {
        let slack = self.unique.as_ref().map_or(0, |u| u.spec().max_slack());
        self.index
            .max_tokens_to_accept()
            .is_some_and(|m| (m as usize + slack as usize) < remaining)
    }

    /// The bytes every continuation must start with (empty when there is a
    /// choice, including the choice to stop). Bounded by 64 KiB. XGrammar's
    /// `find_jump_forward_string`.
    pub fn forced_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.terminated {
            return out;
        }
        let mut s = self.state();
        while let Some(b) = self.index.forced_byte(s) {
            out.push(b);
            match self.index.next_byte_state(s, b) {
                Some(n) => s = n,
                None => break,
            }
            if out.len() >= 1 << 16 {
                break;
            }
        }
        out
    }

    /// Jump-forward: takes the tokens of the forced continuation (tokenized
    /// by `tokenizer`, at most `room` of them, each passing the budget check
    /// [`Matcher::fits`]) and returns them. The last token of the forced text
    /// is held back unless it finishes the output, so that the boundary with
    /// what follows is the model's choice, not an artefact of tokenizing the
    /// forced bytes alone.
    #[cfg(feature = "tokenizers")]
    pub fn jump_forward(
        &mut self,
        tokenizer: &TextTokenizer,
        room: usize,
    ) -> Result<Vec<TokenId>, VocabError> {
        let forced = self.forced_bytes();
        if forced.is_empty() || room == 0 {
            return Ok(Vec::new());
        }
        let text = match std::str::from_utf8(&forced) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(&forced[..e.valid_up_to()]).unwrap_or(""),
        };
        if text.is_empty() {
            return Ok(Vec::new());
        }
        let toks = tokenizer.encode(text)?;
        let mut taken = Vec::new();
        for &t in &toks {
            let remaining = room - taken.len();
            if remaining == 0 || !self.fits(t, remaining) || self.advance(t).is_err() {
                break;
            }
            taken.push(t);
        }
        if !taken.is_empty() && !self.is_finished() && taken.len() == toks.len() {
            // Just taken, so there to undo whatever the rollback bound.
            self.tokens.pop();
            self.states.pop();
            if self.budget.is_some() {
                self.regions.pop();
                self.closing = OnceLock::new();
            }
            if let Some(u) = &mut self.unique {
                u.scans.pop();
                u.moved();
            }
            taken.pop();
        }
        Ok(taken)
    }
}
