//! # The backend trait, and the budget written once over it
//!
//! A [`TokenIndex`](super::TokenIndex) asks one of three engines what
//! happens in a state: the eager backend (`eager.rs`: a compact table of
//! live states, every mask computed at build time), the lazy one (`lazy/`:
//! a DFA determinized, and masks computed, as matchers visit states) or the
//! pushdown one (`pushdown.rs`: sets of stacks of grammar fragments,
//! interned on demand). All implement [`Backend`], which is deliberately
//! small: the start, a step on a byte, acceptance, the distance to
//! acceptance, the byte classes, the mask of a state, and a memo for
//! budgets. Every backend answers the step algorithms of `steps.rs` (forced
//! bytes, the canonical shortest completion); written here once for all:
//!
//! * [`budget`] — an upper bound on the fewest tokens to acceptance: the
//!   greedy longest-token tokenization of the canonical shortest completion,
//!   memoized per state in a [`Slots`] array. It is consistent along that
//!   path (taking its first token lowers the bound by exactly one), which is
//!   what a `max_tokens` guard needs to never cut a structure in half.
//!
//! ## No lock on the hot path
//!
//! Every method a matcher calls per token — [`Backend::allowed`],
//! [`Backend::walk`], [`Backend::is_accepting`], [`budget`] — reads
//! write-once or atomic cells. The eager backend never writes after its
//! build. The lazy and pushdown ones publish what their (locked) builders
//! find into append-only atomic arrays (`arena.rs`), so a state once
//! visited by any matcher is read by every other without a lock; only the
//! first visit of a state takes the lock (see `lazy/mod.rs`).

use super::arena::Slots;
use super::steps::{canonical_byte, Steps};
use super::LiveTable;
use crate::vocab::trie::{self, VocabTries, DEAD};
use crate::vocab::{TokenId, TokenSet, Vocabulary};

/// One byte per class and the number of bytes in each class.
#[derive(Clone, Debug)]
pub(crate) struct Classes {
    /// The smallest byte of each class.
    pub reps: Vec<u8>,
    /// How many bytes each class has.
    pub sizes: Vec<u32>,
    /// The class of each byte.
    pub of: Box<[u8; 256]>,
}

impl Classes {
    pub fn new(classes: &[u8; 256]) -> Classes {
        let (reps, sizes) = crate::dfa::class_reps(classes);
        Classes {
            reps,
            sizes,
            of: Box::new(*classes),
        }
    }
}

/// What a [`TokenIndex`](super::TokenIndex) asks of the engine behind it.
/// States are `u32` ids of the backend; [`DEAD`] is "no state".
pub(crate) trait Backend: Send + Sync {
    fn start(&self) -> u32;
    /// States known so far (for a lazy backend: determinized so far).
    fn num_states(&self) -> usize;
    fn is_accepting(&self, s: u32) -> bool;
    /// Shortest completion, in bytes.
    fn dist(&self, s: u32) -> u32;
    /// The state after one byte, or [`DEAD`].
    fn next_byte(&self, s: u32, b: u8) -> u32;
    /// The state after `bytes` (a token's) from `s`, or [`DEAD`] when they
    /// leave the language or lead where no token sequence can finish.
    fn walk(&self, s: u32, bytes: &[u8]) -> u32 {
        let mut s = s;
        for &b in bytes {
            s = self.next_byte(s, b);
            if s == DEAD {
                return DEAD;
            }
        }
        s
    }
    /// The byte classes (bytes of one class lead every state alike).
    fn classes(&self) -> &Classes;
    /// The allowed tokens in `s` (stop tokens included where `s` accepts);
    /// `None` past a size limit of a lazy backend.
    fn allowed(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary) -> Option<&TokenSet>;
    /// Whether `t` is in [`Backend::allowed`]`(s)`; a backend whose masks
    /// may be id lists answers without making their bitset.
    fn allows(&self, s: u32, t: TokenId, tries: &VocabTries, vocab: &Vocabulary) -> bool {
        self.allowed(s, tries, vocab)
            .is_some_and(|set| set.contains(t))
    }
    /// Writes [`Backend::allowed`] into `row` (XGrammar's layout, exactly
    /// `ceil(width / 32)` words; all zero past a size limit).
    fn fill_row(&self, s: u32, tries: &VocabTries, vocab: &Vocabulary, row: &mut [u32]) {
        match self.allowed(s, tries, vocab) {
            Some(set) => set.write_u32_words(row),
            None => row.fill(0),
        }
    }
    /// The memo of [`budget`].
    fn budgets(&self) -> &Slots;
    /// The largest budget of any state, when known.
    fn max_budget(&self) -> Option<u32> {
        None
    }
    /// Bytes held by the tables and distinct masks.
    fn memory_usage(&self) -> usize;
    /// The compact live table, for a backend that has a complete one.
    fn table(&self) -> Option<&LiveTable> {
        None
    }
    /// The limit a growing automaton hit, if any.
    fn limit_error(&self) -> Option<super::LimitHit> {
        None
    }
    /// Whether masks were pruned by token-level liveness.
    fn is_token_pruned(&self) -> bool {
        false
    }
    /// Masks computed from a free part's mask (lazy backend only).
    fn masks_from_free_parts(&self) -> usize {
        0
    }
    /// Masks shared with a state earlier along a run of copies (lazy
    /// backend only).
    fn masks_from_shifts(&self) -> usize {
        0
    }
    /// Masks made from a sibling's (lazy backend only).
    fn masks_from_siblings(&self) -> usize {
        0
    }
    /// Pushdown frames whose mask took every plain token at once (pushdown
    /// backend only).
    fn frames_past_plain_text(&self) -> usize {
        0
    }
}

impl<B: Backend + ?Sized> Steps for B {
    #[inline]
    fn step(&self, s: u32, b: u8) -> u32 {
        self.next_byte(s, b)
    }
    #[inline]
    fn accepts(&self, s: u32) -> bool {
        self.is_accepting(s)
    }
    #[inline]
    fn distance(&self, s: u32) -> u32 {
        self.dist(s)
    }
    fn class_reps(&self) -> &[u8] {
        &self.classes().reps
    }
    fn class_sizes(&self) -> &[u32] {
        &self.classes().sizes
    }
}

/// An upper bound on the tokens that bring `s` to acceptance (0 when it
/// accepts): the greedy longest-token tokenization of its canonical shortest
/// completion; `u32::MAX` when some byte of it starts no token. Memoized in
/// [`Backend::budgets`] for every state on the way.
pub(crate) fn budget<B: Backend + ?Sized>(a: &B, tries: &VocabTries, s: u32) -> u32 {
    let memo = a.budgets();
    let mut chain: Vec<u32> = Vec::new();
    let mut path: Vec<u32> = Vec::with_capacity(32);
    let mut cur = s;
    let mut base = loop {
        if cur == DEAD {
            break u32::MAX;
        }
        if let Some(b) = memo.get(cur) {
            break b;
        }
        if a.is_accepting(cur) {
            memo.set(cur, 0);
            break 0;
        }
        let from = cur;
        let mut at = cur;
        let tok = trie::longest_prefix_token(&tries.full, |k| {
            if k == 0 {
                at = from;
                path.clear();
            }
            // (DEAD only after a size limit left a state without rows.)
            if at == DEAD {
                return None;
            }
            let b = canonical_byte(a, at)?;
            at = a.next_byte(at, b);
            path.push(at);
            Some(b)
        });
        match tok {
            Some((len, _)) => {
                chain.push(cur);
                cur = path[len - 1];
            }
            None => break u32::MAX,
        }
    };
    for &st in chain.iter().rev() {
        base = base.saturating_add(1);
        memo.set(st, base);
    }
    base
}
