//! # Guide: the per-request cursor over a shared index
//!
//! A [`Guide`] is what one generation request holds: a stack of index states
//! (one per token taken, so [`Guide::rollback`] is a pop) over an
//! `Arc<TokenIndex>` shared by every request. It allocates nothing per step:
//! [`Guide::allowed`] returns the index's shared mask for the current state and
//! [`Guide::advance`] walks the token's bytes through the index's table.
//!
//! Invariants: every state on the stack is live (acceptance is reachable);
//! a token is accepted by `advance` exactly when it is in `allowed()`; once an
//! EOS id has been taken the guide is finished and allows nothing.

use crate::index::{StateId, TokenIndex, TokenSet};
use crate::vocab::TokenId;
use std::sync::Arc;

/// Why the guide refused a step.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GuideError {
    #[error("token {token} ({text}) is not allowed after {position} tokens")]
    NotAllowed {
        token: TokenId,
        text: String,
        position: usize,
    },
    #[error("the output is finished: no token may follow end-of-sequence")]
    Finished,
    #[error("cannot roll back {requested} tokens: only {available} taken")]
    Rollback { requested: usize, available: usize },
}

/// Per-request state over a shared [`TokenIndex`].
#[derive(Clone, Debug)]
pub struct Guide {
    index: Arc<TokenIndex>,
    /// `states[0]` is the start; `states[i + 1]` follows `tokens[i]`.
    states: Vec<StateId>,
    tokens: Vec<TokenId>,
    finished: bool,
}

impl Guide {
    /// A guide at the start state.
    pub fn new(index: Arc<TokenIndex>) -> Guide {
        let start = index.start();
        Guide {
            index,
            states: vec![start],
            tokens: Vec::new(),
            finished: false,
        }
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

    /// Tokens taken so far (EOS included once taken).
    pub fn tokens(&self) -> &[TokenId] {
        &self.tokens
    }

    /// The allowed tokens now (EOS ids exactly when the text is complete;
    /// empty once finished).
    #[inline]
    pub fn allowed(&self) -> &TokenSet {
        if self.finished {
            return self.index.empty_set();
        }
        self.index.allowed(self.state())
    }

    /// Whether `t` may be taken now.
    #[inline]
    pub fn is_allowed(&self, t: TokenId) -> bool {
        !self.finished && self.index.next_state(self.state(), t).is_some()
    }

    /// Takes token `t`. A disallowed token is an error and changes nothing.
    pub fn advance(&mut self, t: TokenId) -> Result<(), GuideError> {
        if self.finished {
            return Err(GuideError::Finished);
        }
        match self.index.next_state(self.state(), t) {
            Some(next) => {
                self.finished = self.index.vocab().is_eos(t);
                self.states.push(next);
                self.tokens.push(t);
                Ok(())
            }
            None => Err(GuideError::NotAllowed {
                token: t,
                text: self.index.vocab().describe(t),
                position: self.tokens.len(),
            }),
        }
    }

    /// Whether the text so far is in the language.
    #[inline]
    pub fn is_accepting(&self) -> bool {
        self.index.is_accepting(self.state())
    }

    /// Whether nothing may follow: EOS was taken, or the text is complete and
    /// no text token can extend it.
    pub fn is_finished(&self) -> bool {
        if self.finished {
            return true;
        }
        let s = self.state();
        self.index.is_accepting(s)
            && self.index.bytes_to_accept(s) == 0
            && !self.has_text_continuation(s)
    }

    fn has_text_continuation(&self, s: StateId) -> bool {
        self.index.has_text_continuation(s)
    }

    /// Undoes the last `n` tokens.
    pub fn rollback(&mut self, n: usize) -> Result<(), GuideError> {
        if n > self.tokens.len() {
            return Err(GuideError::Rollback {
                requested: n,
                available: self.tokens.len(),
            });
        }
        if n > 0 {
            self.tokens.truncate(self.tokens.len() - n);
            self.states.truncate(self.states.len() - n);
            self.finished = false;
        }
        Ok(())
    }

    /// Back to the start state.
    pub fn reset(&mut self) {
        self.states.truncate(1);
        self.tokens.clear();
        self.finished = false;
    }

    /// A number of tokens that always suffices to reach acceptance from here
    /// (an upper bound on the fewest; 0 when the text is complete). `None`
    /// when the vocabulary cannot spell the shortest completion.
    pub fn tokens_to_accept(&self) -> Option<u32> {
        if self.finished {
            return Some(0);
        }
        self.index.tokens_to_accept(self.state())
    }

    /// [`Guide::tokens_to_accept`] after taking `t`; `None` when `t` is not
    /// allowed (or the bound is unknown).
    pub fn tokens_to_accept_after(&self, t: TokenId) -> Option<u32> {
        if self.finished {
            return None;
        }
        let next = self.index.next_state(self.state(), t)?;
        if self.index.vocab().is_eos(t) {
            return Some(0);
        }
        self.index.tokens_to_accept(next)
    }

    /// The bytes every continuation must start with (empty when there is a
    /// choice, including the choice to stop). Bounded by 64 KiB.
    pub fn forced_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.finished {
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
}
