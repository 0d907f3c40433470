//! # The step every loop shares
//!
//! The plain, guided, speculative and beam loops differ in where their
//! logits come from and in how they choose a token, but each step does the
//! same things with them, through the same code:
//!
//! * **the mask**: the allowed tokens of the sequence's [`Matcher`];
//! * **the budget** ([`Budget`]): which allowed tokens keep the output
//!   completable within what is left of `max_tokens` ([`Matcher::fits`]);
//!   the plain and guided loops redraw a token that does not fit, the
//!   speculative loop folds that redraw into the distributions it compares,
//!   contrastive guidance takes its cutoff over the tokens that fit, and
//!   beam search never extends a hypothesis by one;
//! * **the trace** ([`Trail`]): one [`TraceStep`] per output token, a sampled
//!   step from the raw logits under the mask, a forced step for a token
//!   appended by jump-forward;
//! * **jump-forward**: [`Matcher::jump_forward`] with the budget left as its
//!   room (the plain, guided and speculative loops through
//!   `Decoder::jump_forward`; beam search in its greedy run).
//!
//! A trail that is off records nothing and allocates nothing, so a loop
//! pays for the trace only when one is asked for. A trail that is on is a
//! shared list: cloning it (beam search does, for every extension it keeps)
//! copies one pointer, and hypotheses that share a prefix share its steps.

use crate::trace::{self, TraceStep};
use constrain::index::TokenSet;
use constrain::matcher::Matcher;
use constrain::vocab::{TokenId, Vocabulary};
use std::rc::Rc;

/// The budget rule at one step: `remaining` tokens left (counting the one
/// about to be taken) under `matcher`.
pub(super) struct Budget<'m> {
    matcher: &'m Matcher,
    remaining: usize,
}

impl<'m> Budget<'m> {
    pub(super) fn new(matcher: &'m Matcher, remaining: usize) -> Self {
        Budget { matcher, remaining }
    }

    /// Whether every allowed token fits, known without looking at any (the
    /// index's largest budget is below what is left): nothing to check, no
    /// logits to keep for a redraw.
    pub(super) fn always_fits(&self) -> bool {
        self.matcher.always_fits(self.remaining)
    }

    /// Whether taking `t` leaves room to reach acceptance.
    pub(super) fn fits(&self, t: TokenId) -> bool {
        self.matcher.fits(t, self.remaining)
    }

    /// The allowed tokens that fit, over a vocabulary of `width` logits
    /// (empty when none does).
    pub(super) fn viable(&self, width: usize) -> TokenSet {
        let mut v = TokenSet::new(width);
        for u in self.matcher.allowed().iter().filter(|&u| self.fits(u)) {
            v.insert(u);
        }
        v
    }
}

/// The trace of one sequence: its steps so far, or nothing when tracing is
/// off (see the module docs).
#[derive(Clone)]
pub(super) struct Trail {
    on: bool,
    len: usize,
    last: Option<Rc<Link>>,
}

struct Link {
    step: TraceStep,
    prev: Option<Rc<Link>>,
}

impl Trail {
    /// An empty trail, recording when `on`.
    pub(super) fn new(on: bool) -> Self {
        Trail {
            on,
            len: 0,
            last: None,
        }
    }

    pub(super) fn is_on(&self) -> bool {
        self.on
    }

    /// Steps recorded.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Appends `step` (when on).
    pub(super) fn push(&mut self, step: TraceStep) {
        if !self.on {
            return;
        }
        self.last = Some(Rc::new(Link {
            step,
            prev: self.last.take(),
        }));
        self.len += 1;
    }

    /// Records the step of a sampled token `t`: `raw` are the logits it was
    /// picked from before the sampler touched them, `allowed` the mask.
    pub(super) fn sampled(
        &mut self,
        raw: &[f32],
        allowed: Option<&TokenSet>,
        t: TokenId,
        vocab: &Vocabulary,
    ) {
        if self.on {
            self.push(trace::sampled_step(self.len, raw, allowed, t, vocab));
        }
    }

    /// Records the step of a token appended by jump-forward.
    pub(super) fn forced(&mut self, t: TokenId, vocab: &Vocabulary) {
        if self.on {
            self.push(trace::forced_step(self.len, t, vocab));
        }
    }

    /// The steps, first to last (empty when off).
    pub(super) fn into_steps(mut self) -> Vec<TraceStep> {
        let mut steps = Vec::with_capacity(self.len);
        let mut cur = self.last.take();
        while let Some(link) = cur {
            cur = match Rc::try_unwrap(link) {
                Ok(mut l) => {
                    let prev = l.prev.take();
                    steps.push(l.step);
                    prev
                }
                Err(shared) => {
                    steps.push(shared.step.clone());
                    shared.prev.clone()
                }
            };
        }
        steps.reverse();
        steps
    }
}

impl Drop for Trail {
    /// Unlinks the steps one by one: dropping a long list recursively could
    /// overflow the stack.
    fn drop(&mut self) {
        let mut cur = self.last.take();
        while let Some(link) = cur {
            cur = match Rc::try_unwrap(link) {
                Ok(mut l) => l.prev.take(),
                Err(_) => None,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceToken;

    fn step(i: usize) -> TraceStep {
        TraceStep {
            step: i,
            token: TraceToken {
                id: i as u32,
                text: String::new(),
                bytes: Vec::new(),
                logit: None,
            },
            forced: true,
            logprob: 0.0,
            allowed_count: 1,
            allowed_mass: None,
            top: Vec::new(),
        }
    }

    #[test]
    fn clones_share_their_prefix_and_diverge_after_it() {
        let mut a = Trail::new(true);
        for i in 0..3 {
            a.push(step(i));
        }
        let mut b = a.clone();
        a.push(step(10));
        b.push(step(20));
        b.push(step(21));
        let ids = |t: Trail| {
            t.into_steps()
                .iter()
                .map(|s| s.token.id)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(b.clone()), [0, 1, 2, 20, 21]);
        assert_eq!(ids(a), [0, 1, 2, 10]);
        assert_eq!(b.len(), 5);
        assert_eq!(ids(b), [0, 1, 2, 20, 21]);
    }

    #[test]
    fn an_off_trail_records_nothing() {
        let mut t = Trail::new(false);
        t.push(step(0));
        assert_eq!(t.len(), 0);
        assert!(t.into_steps().is_empty());
    }

    #[test]
    fn a_long_trail_drops_without_recursion() {
        let mut t = Trail::new(true);
        for i in 0..100_000 {
            t.push(step(i));
        }
        let keep = t.clone();
        drop(t);
        assert_eq!(keep.len(), 100_000);
        drop(keep);
    }
}
