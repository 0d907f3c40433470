//! # Token index: which tokens keep the text inside the language
//!
//! A [`TokenIndex`] lifts a byte automaton to the token level over a
//! [`Vocabulary`]. For every live state of the automaton (reachable from the
//! start *and* able to reach acceptance) it knows the set of allowed tokens as
//! a bitset of the logits width ([`TokenSet`]); where a token leads is found by
//! walking its bytes through the compact transition table (a few table lookups),
//! which costs less than storing ~150k successor ids per string-interior state.
//!
//! ## Invariants
//!
//! * A token is in a state's mask exactly when reading its bytes ends in a live
//!   state, i.e. one from which acceptance is reachable. So no mask allows a
//!   dead end.
//! * EOS ids are in a mask exactly when the state accepts.
//! * Added tokens and ids past the tokenizer are never in a mask.
//! * A live state that allows nothing (possible only with a vocabulary that
//!   lacks some single bytes) is reported at build time as
//!   [`IndexError::IncompatibleVocabulary`].
//! * The index is immutable, `Send + Sync`, and shared through `Arc`.
//!
//! ## How it is built (eager mode)
//!
//! Walking every token from every state costs seconds (2.5 s for a
//! 2,549-state record regex over the Qwen vocabulary, against 0.65 s for the
//! trie walk alone; see `docs/performance.md`): the walk over a depth-first
//! token trie (`vocab/trie.rs`) skips a whole subtree at the first dead
//! byte. On top of that, states are grouped
//! by **bounded-horizon equivalence**: two states whose futures agree (live vs
//! dead) on every string of at most `horizon` bytes allow the same tokens of
//! at most `horizon` bytes. A Moore-style partition refinement run for
//! `horizon` rounds finds those classes; one representative per class walks
//! the trie of *short* tokens, and every state walks the small trie of the few
//! *long* tokens on its own. Masks are deduplicated (one `Arc` per distinct
//! set), and class walks run in parallel on a rayon pool (`threads`). The
//! class walks are put together from subtrees walked once each, and a
//! counted class or a word's loop takes its tokens from the vocabulary's
//! byte-chain tries (`class_walks.rs`).
//!
//! In lazy mode a state's mask is computed on first visit (one walk of the
//! full trie) and cached in the shared index; both modes give identical masks.
//! An index over a [`LazyDfa`](crate::dfa::LazyDfa) (a DFA too big to
//! determinize up front, see [`TokenIndex::build_dfa`]) is lazy in both: the
//! automaton and the masks grow as guides visit states (`lazy/`).
//!
//! An index over a pushdown automaton ([`crate::pda`]: grammar fragments
//! that call one another) is lazy too: sets of stacks are interned as the
//! states of a DFA built on demand (`pushdown.rs`, see
//! `TokenIndex::build_pda`).
//!
//! ## Three engines, one set of algorithms
//!
//! The eager, the lazy and the pushdown engine implement one small trait
//! (`backend.rs`: start, step, acceptance, distance, byte classes, mask);
//! the budget (`backend.rs`), the canonical completion, forced bytes and the
//! backward searches (`steps.rs`) are written once over it. None takes a
//! lock on the mask / advance hot path: the engines built on demand publish
//! into the lock-free arrays of `arena.rs`. The tries they walk belong to
//! the vocabulary (`vocab/trie.rs`), and so does [`TokenSet`].
//!
//! ## Budget
//!
//! For every state the index keeps an upper bound on the fewest tokens that
//! reach acceptance: the greedy longest-token tokenization of the canonical
//! shortest byte completion. It is consistent along that path (taking its
//! first token lowers the bound by exactly one), which is what a `max_tokens`
//! guard needs to never cut a structure in half.

mod arena;
pub mod automaton;
mod backend;
mod class_walks;
mod eager;
mod lazy;
mod limit;
mod pushdown;
mod steps;

pub use crate::region::TokenBudget;
pub use crate::vocab::TokenSet;
pub use automaton::ByteAutomaton;
pub(crate) use automaton::{LiveTable, DEAD};
pub use limit::LimitHit;

use crate::vocab::trie::VocabTries;
use crate::vocab::{TokenId, Vocabulary};
use backend::Backend;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Hash map with a fast, non-cryptographic hasher (keys here are our own).
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// How to build an index. Defaults are documented per field.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct IndexConfig {
    /// Precompute every state's mask at build time (default `true`). When
    /// `false`, masks are computed on first visit and cached.
    pub eager: bool,
    /// Worker threads for the eager build: 0 = all cores (default), 1 = the
    /// calling thread only.
    pub threads: usize,
    /// Longest token handled by the bounded-horizon class walk (default 16);
    /// longer tokens are walked per state.
    pub horizon: usize,
    /// Most automaton states explored (default 2,000,000).
    pub max_states: usize,
    /// Most memory for distinct masks, in bytes (default 1 GiB).
    pub max_mask_memory: usize,
    /// Give up with [`IndexError::Deadline`] after this instant (default none).
    pub deadline: Option<Instant>,
    /// Pushdown sources: build each configuration's mask from its top
    /// frames' shared context-independent masks and the exit tokens
    /// resolved against the stack (default `true`, XGrammar's split; see
    /// `index/pushdown.rs`); `false` walks the vocabulary trie once per configuration
    /// (for comparisons).
    pub pda_split: bool,
}

crate::config_setters!(IndexConfig {
    eager: bool,
    threads: usize,
    horizon: usize,
    max_states: usize,
    max_mask_memory: usize,
    deadline: Option<Instant>,
    pda_split: bool,
});

impl Default for IndexConfig {
    fn default() -> Self {
        IndexConfig {
            eager: true,
            threads: 0,
            horizon: 16,
            max_states: 2_000_000,
            max_mask_memory: 1 << 30,
            deadline: None,
            pda_split: true,
        }
    }
}

/// Why an index could not be built.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The automaton accepts no text at all.
    #[error("the language is empty: no text can ever be accepted")]
    EmptyLanguage,
    /// The automaton has more live states than [`IndexConfig::max_states`].
    #[error("the automaton has more than {limit} states (raise it with IndexConfig::max_states)")]
    TooManyStates {
        /// The limit passed, in states.
        limit: usize,
    },
    /// The eager masks need more than [`IndexConfig::max_mask_memory`].
    #[error("the masks need more than {limit} bytes (raise it with IndexConfig::max_mask_memory)")]
    TooMuchMemory {
        /// The limit passed, in bytes.
        limit: usize,
    },
    /// A live state that no token of the vocabulary can continue.
    #[error("incompatible vocabulary: after {prefix:?} the text can continue but no token fits")]
    IncompatibleVocabulary {
        /// Some text that leads to that state (lossy UTF-8).
        prefix: String,
    },
    /// The build passed [`IndexConfig::deadline`].
    #[error("index build passed its deadline")]
    Deadline,
    /// The build's thread pool could not be started.
    #[error("cannot start the thread pool: {0}")]
    Threads(#[from] rayon::ThreadPoolBuildError),
    /// The pattern did not become a DFA.
    #[error(transparent)]
    Dfa(#[from] crate::dfa::DfaError),
}

/// Figures about a built index.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct IndexStats {
    /// Live states (reachable and able to reach acceptance).
    pub states: usize,
    /// Byte classes of the automaton.
    pub byte_classes: usize,
    /// Bounded-horizon classes walked (eager mode).
    pub horizon_classes: usize,
    /// States where every plain token is allowed (string interiors).
    pub body_states: usize,
    /// Distinct masks stored.
    pub distinct_masks: usize,
    /// Memory of the table and masks, in bytes.
    pub memory_bytes: usize,
    /// Wall time of the build.
    pub build_time: Duration,
    /// Whether the automaton and masks are built on demand (then `states`
    /// counts the states found when the index was built).
    pub lazy: bool,
}

/// The per-state allowed-token sets of an automaton over a vocabulary.
pub struct TokenIndex {
    vocab: Arc<Vocabulary>,
    tries: Arc<VocabTries>,
    backend: Box<dyn Backend>,
    lazy: bool,
    empty: TokenSet,
    stats: IndexStats,
    /// A region of the output bounded in tokens (a structural tag's
    /// `any_text.max_tokens`), which every matcher of the index keeps.
    budget: Option<Arc<TokenBudget>>,
    /// Arrays of distinct items, checked by every matcher of the index
    /// ([`crate::unique`]).
    unique: Option<Arc<crate::unique::UniqueItems>>,
}

impl std::fmt::Debug for TokenIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenIndex")
            .field("stats", &self.stats)
            .finish()
    }
}

/// An identifier of a live state of an index.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StateId(pub u32);

impl TokenIndex {
    /// Builds the index of `automaton` over `vocab` (eager backend).
    pub fn build<A: ByteAutomaton>(
        automaton: &A,
        vocab: Arc<Vocabulary>,
        config: &IndexConfig,
    ) -> Result<TokenIndex, IndexError> {
        let t0 = Instant::now();
        let horizon = config.horizon.max(1);
        let tries = if horizon == IndexConfig::default().horizon {
            shared_tries(&vocab)
        } else {
            Arc::new(VocabTries::new(&vocab, horizon))
        };
        let mut stats = IndexStats::default();
        let backend = eager::Eager::build(automaton, &tries, &vocab, config, &mut stats)?;
        stats.build_time = t0.elapsed();
        stats.memory_bytes = backend.memory_usage();
        Ok(TokenIndex {
            budget: None,
            unique: None,
            empty: TokenSet::new(vocab.logits_width()),
            backend: Box::new(backend),
            lazy: false,
            stats,
            vocab,
            tries,
        })
    }

    /// Builds the index of a [`Dfa`](crate::dfa::Dfa): eagerly for a whole
    /// DFA ([`TokenIndex::build`]), lazily for a [`LazyDfa`](crate::dfa::LazyDfa):
    /// masks and the automaton itself then grow on first visit, and the build
    /// only checks the start state. A vocabulary that lacks some single byte
    /// needs the whole automaton (token-level liveness), so a lazy DFA is then
    /// finished and indexed eagerly.
    pub fn build_dfa(
        dfa: crate::dfa::Dfa,
        vocab: Arc<Vocabulary>,
        config: &IndexConfig,
    ) -> Result<TokenIndex, IndexError> {
        let dfa = match dfa {
            crate::dfa::Dfa::Eager(d) => return Self::build(&d, vocab, config),
            crate::dfa::Dfa::Lazy(d) => *d,
        };
        if !has_every_byte(&vocab) {
            return Self::build(&dfa.into_eager()?, vocab, config);
        }
        let t0 = Instant::now();
        let start = dfa.start();
        if start == 0 || dfa.dist(start) == u32::MAX {
            return Err(IndexError::EmptyLanguage);
        }
        let tries = shared_tries(&vocab);
        let classes = dfa.byte_classes();
        let stride = classes.iter().map(|&c| c as usize).max().unwrap_or(0) + 1;
        let states = dfa.state_count();
        let lazy = lazy::Lazy::new(dfa, config.max_states);
        // The first mask is part of what a caller waits for anyway.
        lazy.allowed(start, &tries, &vocab);
        let stats = IndexStats {
            states,
            byte_classes: stride,
            lazy: true,
            distinct_masks: lazy.mask_memory().0,
            memory_bytes: lazy.mask_memory().1,
            build_time: t0.elapsed(),
            ..Default::default()
        };
        Ok(TokenIndex {
            budget: None,
            unique: None,
            empty: TokenSet::new(vocab.logits_width()),
            backend: Box::new(lazy),
            lazy: true,
            stats,
            vocab,
            tries,
        })
    }

    /// The index of a pushdown automaton ([`crate::pda`]): configurations,
    /// their transitions and masks are built on demand, like a lazy DFA's.
    /// `None` when the start cannot be completed. Needs every single byte
    /// in the vocabulary (then byte-live is token-live).
    pub(crate) fn build_pda(
        pda: crate::pda::Pda,
        vocab: Arc<Vocabulary>,
        config: &IndexConfig,
    ) -> Result<TokenIndex, IndexError> {
        let t0 = Instant::now();
        let tries = shared_tries(&vocab);
        let states = pda.states;
        let engine = pushdown::Engine::new(pda, config.max_states, config.pda_split)
            .ok_or(IndexError::EmptyLanguage)?;
        // The first mask is part of what a caller waits for anyway.
        engine.allowed(engine.start(), &tries, &vocab);
        let (distinct_masks, memory_bytes) = engine.mask_memory();
        let stats = IndexStats {
            states,
            lazy: true,
            distinct_masks,
            memory_bytes,
            build_time: t0.elapsed(),
            ..Default::default()
        };
        Ok(TokenIndex {
            budget: None,
            unique: None,
            empty: TokenSet::new(vocab.logits_width()),
            backend: Box::new(engine),
            lazy: true,
            stats,
            vocab,
            tries,
        })
    }

    /// Whether the automaton and masks are built on demand.
    pub fn is_lazy(&self) -> bool {
        self.lazy
    }

    /// The limit a lazy index's automaton hit while growing, if any: states
    /// past it were left without live transitions (their masks are empty).
    pub fn lazy_limit_error(&self) -> Option<LimitHit> {
        self.backend.limit_error()
    }

    /// How many masks a lazy index has computed from the mask of a part
    /// of their state shared with other states (the extra-key trie at a
    /// key's start: see `index/lazy/free_part.rs`, `Lazy::free_part_mask`); 0 for an
    /// eager index.
    pub fn masks_from_free_parts(&self) -> usize {
        self.backend.masks_from_free_parts()
    }

    /// How many masks a lazy index has shared with a state earlier along a
    /// counted repetition (the same threads some copies back, see
    /// `dfa/shift.rs`); 0 for an eager index.
    pub fn masks_from_shifts(&self) -> usize {
        self.backend.masks_from_shifts()
    }

    /// How many masks a lazy index has made from a sibling's (a state that
    /// differs only in the keys written so far, see `index/lazy/siblings.rs`);
    /// 0 for an eager index.
    pub fn masks_from_siblings(&self) -> usize {
        self.backend.masks_from_siblings()
    }

    /// How many frames of a pushdown index took every plain token at once
    /// and walked only the other tokens (a property name beside extra
    /// keys, see `index/pushdown.rs`, `Engine::plain_reach`); 0 for the
    /// other engines.
    pub fn frames_past_plain_text(&self) -> usize {
        self.backend.frames_past_plain_text()
    }

    /// Whether masks were pruned by token-level liveness (the vocabulary lacks
    /// some single bytes, so some byte-live continuations cannot be spelled).
    pub fn is_token_pruned(&self) -> bool {
        self.backend.is_token_pruned()
    }

    /// The vocabulary's token tries (shared by every index over it).
    pub(crate) fn tries(&self) -> &VocabTries {
        &self.tries
    }

    /// The vocabulary the index is over.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Figures about the index.
    pub fn stats(&self) -> &IndexStats {
        &self.stats
    }

    /// Whether the index holds the language's complete table of live
    /// states (the eager engine): every state is known at build time.
    pub fn is_complete(&self) -> bool {
        self.backend.table().is_some()
    }

    /// A random text of the language (random live bytes, stopping at an
    /// accepting state with probability `1/8`, then the shortest completion
    /// once `soft_max` bytes are written), for tests and soak runs; `None`
    /// unless [`TokenIndex::is_complete`].
    pub fn random_text(&self, rng: &mut impl rand::Rng, soft_max: usize) -> Option<Vec<u8>> {
        self.backend.table().map(|t| t.random_text(rng, soft_max))
    }

    /// The start state.
    pub fn start(&self) -> StateId {
        StateId(self.backend.start())
    }

    /// Number of live states (for a lazy index: states found so far, which
    /// may include some that cannot be completed; those are never entered).
    pub fn num_states(&self) -> usize {
        self.backend.num_states()
    }

    /// Whether the text that led to `s` is in the language.
    #[inline]
    pub fn is_accepting(&self, s: StateId) -> bool {
        self.backend.is_accepting(s.0)
    }

    /// The allowed tokens in `s` (EOS included where `s` accepts). Computed
    /// on first use in lazy mode.
    #[inline]
    pub fn allowed(&self, s: StateId) -> &TokenSet {
        self.backend
            .allowed(s.0, &self.tries, &self.vocab)
            .unwrap_or(&self.empty)
    }

    /// Whether `t` is allowed in `s` (as [`TokenIndex::allowed`]`(s).contains(t)`),
    /// without making a lazy index's small masks into bitsets.
    #[inline]
    pub fn allows(&self, s: StateId, t: TokenId) -> bool {
        self.backend.allows(s.0, t, &self.tries, &self.vocab)
    }

    /// Writes the allowed tokens in `s` (as [`TokenIndex::allowed`]) into
    /// `row` in XGrammar's layout (token `t` is bit `t % 32` of
    /// `row[t / 32]`); `row` has exactly `ceil(logits width / 32)` words.
    /// Same result as writing [`TokenIndex::allowed`], but a lazy index's
    /// small masks are written from their id lists without a bitset.
    #[inline]
    pub fn fill_row(&self, s: StateId, row: &mut [u32]) {
        self.backend.fill_row(s.0, &self.tries, &self.vocab, row)
    }

    /// The region of the output bounded in tokens, if the constraint has
    /// one ([`TokenBudget`]): every [`crate::Matcher`] of the index keeps
    /// it.
    pub fn token_budget(&self) -> Option<&Arc<TokenBudget>> {
        self.budget.as_ref()
    }

    /// The same index with `budget` kept by its matchers.
    pub fn with_token_budget(mut self, budget: Option<TokenBudget>) -> TokenIndex {
        self.set_token_budget(budget);
        self
    }

    pub(crate) fn set_token_budget(&mut self, budget: Option<TokenBudget>) {
        self.budget = budget.map(Arc::new);
    }

    /// The class of each byte: bytes of one class lead every state alike.
    pub(crate) fn byte_class_of(&self) -> &[u8; 256] {
        &self.backend.classes().of
    }

    /// The arrays whose items every matcher of the index keeps distinct
    /// ([`crate::unique`]), if any.
    pub fn unique_items(&self) -> Option<&Arc<crate::unique::UniqueItems>> {
        self.unique.as_ref()
    }

    pub(crate) fn set_unique_items(&mut self, unique: Option<crate::unique::UniqueItems>) {
        self.unique = unique.filter(|u| !u.is_empty()).map(Arc::new);
    }

    /// Whether some byte can follow the text that led to `s`.
    pub fn has_text_continuation(&self, s: StateId) -> bool {
        steps::has_continuation(self.backend.as_ref(), s.0)
    }

    /// The state after byte `b` in `s`; `None` when `b` cannot follow.
    pub fn next_byte_state(&self, s: StateId, b: u8) -> Option<StateId> {
        let n = self.backend.next_byte(s.0, b);
        (n != DEAD).then_some(StateId(n))
    }

    /// An empty set of the logits width.
    pub fn empty_set(&self) -> &TokenSet {
        &self.empty
    }

    /// The state after `t` in `s`; `None` when `t` is not allowed there. EOS
    /// leaves the state unchanged (and is allowed only when `s` accepts).
    #[inline]
    pub fn next_state(&self, s: StateId, t: TokenId) -> Option<StateId> {
        match self.vocab.spelling(t) {
            Some(bytes) if !bytes.is_empty() => {
                let n = self.backend.walk(s.0, bytes);
                (n != DEAD).then_some(StateId(n))
            }
            Some(_) => None,
            None => (self.vocab.is_eos(t) && self.is_accepting(s)).then_some(s),
        }
    }

    /// An upper bound on the fewest tokens that bring `s` to acceptance
    /// (0 when `s` accepts); `None` when the vocabulary cannot spell the
    /// shortest completion.
    #[inline]
    pub fn tokens_to_accept(&self, s: StateId) -> Option<u32> {
        let b = backend::budget(self.backend.as_ref(), &self.tries, s.0);
        (b != u32::MAX).then_some(b)
    }

    /// An upper bound on [`TokenIndex::tokens_to_accept`] over every state
    /// (`None` when not known, as for a lazy index). With more tokens left
    /// than this, no token can break a `max_tokens` budget.
    pub fn max_tokens_to_accept(&self) -> Option<u32> {
        self.backend.max_budget()
    }

    /// Shortest completion of `s`, in bytes.
    pub fn bytes_to_accept(&self, s: StateId) -> u32 {
        self.backend.dist(s.0)
    }

    /// The byte every continuation of `s` must start with, if there is one
    /// and `s` does not accept.
    #[inline]
    pub fn forced_byte(&self, s: StateId) -> Option<u8> {
        steps::forced_byte(self.backend.as_ref(), s.0)
    }
}

impl Vocabulary {
    /// Builds now the tables that every index over this vocabulary shares
    /// and otherwise builds on first use, inside some request's mask step:
    /// the token tries, each plain level and the string-body tries (tens of
    /// milliseconds in all for Qwen). For a runner or server that wants no
    /// request to pay them; the byte-chain tries, which depend on the
    /// patterns, are still built when first needed.
    pub fn build_index_tables(&self) {
        shared_tries(self).build_lazy_parts();
    }
}

/// The vocabulary's tries at the default horizon, built once and shared.
fn shared_tries(vocab: &Vocabulary) -> Arc<VocabTries> {
    vocab
        .tries
        .get_or_init(|| Arc::new(VocabTries::new(vocab, IndexConfig::default().horizon)))
        .clone()
}

/// Whether every single byte is a text token (then whatever text can follow
/// can be spelled, so byte-live states are token-live).
///
/// Read from the vocabulary's shared tries (built once per vocabulary, and
/// needed by every index anyway): a scan of the whole vocabulary here cost
/// a tenth of a median MaskBench schema's time to first mask, two or three
/// times per compile.
pub(crate) fn has_every_byte(vocab: &Vocabulary) -> bool {
    shared_tries(vocab).every_byte
}

/// UTF-8 sequences of characters at or above U+0080 (RFC 3629 table), as
/// byte ranges per position.
const UTF8_SEQUENCES: &[&[(u8, u8)]] = &[
    &[(0xC2, 0xDF), (0x80, 0xBF)],
    &[(0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)],
    &[(0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)],
    &[(0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)],
    &[(0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)],
];

pub(crate) const NO_LEVEL: u8 = u8::MAX;

/// Fewest ASCII bytes of a byte chain's set (smaller sets, such as digits,
/// start few tokens: a walk is cheap there).
pub(crate) const BYTE_CHAIN_MIN_BYTES: u32 = 16;

/// The set of ASCII bytes that lead a state to its most common live
/// successor (`next(b)`: the successor on `b`, [`DEAD`] when dead), when
/// it has at least [`BYTE_CHAIN_MIN_BYTES`] bytes: the set of a byte chain,
/// for the eager class walks and the lazy index alike.
pub(crate) fn byte_chain_set(mut next: impl FnMut(u8) -> u32) -> Option<u128> {
    let mut groups: Vec<(u32, u32, u128)> = Vec::new();
    for b in 0..128u8 {
        let t = next(b);
        if t == DEAD {
            continue;
        }
        match groups.iter_mut().find(|g| g.0 == t) {
            Some(g) => {
                g.1 += 1;
                g.2 |= 1 << b;
            }
            None => groups.push((t, 1, 1 << b)),
        }
    }
    let best = groups.iter().max_by_key(|g| g.1)?;
    (best.1 >= BYTE_CHAIN_MIN_BYTES).then_some(best.2)
}

/// Appends to `out` the states one plain character (a byte of `ascii`, or a
/// whole UTF-8 sequence over the class representatives of `utf8`) leads to
/// from `s`; false when one of them is dead.
pub(crate) fn plain_successors(
    mut step: impl FnMut(u32, u8) -> u32,
    s: u32,
    reps: &PlainReps,
    cur: &mut Vec<u32>,
    next: &mut Vec<u32>,
    out: &mut Vec<u32>,
) -> bool {
    for &b in &reps.ascii {
        let x = step(s, b);
        if x == DEAD {
            return false;
        }
        out.push(x);
    }
    for seq in &reps.utf8 {
        cur.clear();
        cur.push(s);
        for reps in seq {
            next.clear();
            for &q in cur.iter() {
                for &b in reps {
                    let x = step(q, b);
                    if x == DEAD {
                        return false;
                    }
                    if !next.contains(&x) {
                        next.push(x);
                    }
                }
            }
            std::mem::swap(cur, next);
        }
        out.extend_from_slice(cur);
    }
    true
}

/// For every state, how many *plain* characters may follow it for sure: every
/// printable ASCII byte but `"` and `\\` and every complete UTF-8 character
/// at or above U+0080 (through live intermediate states) counts as one, and
/// `r(s)` is the largest number such that every plain text of at most `r(s)`
/// characters from `s` stays live (`u32::MAX`: any length, a greatest
/// fixpoint). So in `s` every plain token of at most `r(s)` characters is
/// allowed, and the mask is a precomputed plain set plus a walk over the
/// other tokens (`vocab::trie::PlainLevel`). These are the interiors of JSON
/// strings — unbounded (`r = ∞`), counted by `maxLength` (`r` = what is
/// left), and property names — the most expensive states to walk otherwise.
/// Exact: liveness is all a mask needs.
/// One byte per class of the plain ASCII characters, and per UTF-8 sequence
/// shape one byte per class at each position (what [`plain_successors`]
/// tries).
pub(crate) struct PlainReps {
    ascii: Vec<u8>,
    utf8: Vec<Vec<Vec<u8>>>,
}

impl PlainReps {
    pub(crate) fn new(classes: &[u8; 256]) -> PlainReps {
        let mut seen = [false; 256];
        let mut ascii: Vec<u8> = Vec::new();
        for b in 0x20u8..=0x7E {
            if b != b'"' && b != b'\\' && !seen[classes[b as usize] as usize] {
                seen[classes[b as usize] as usize] = true;
                ascii.push(b);
            }
        }
        let utf8: Vec<Vec<Vec<u8>>> = UTF8_SEQUENCES
            .iter()
            .map(|seq| {
                seq.iter()
                    .map(|&(lo, hi)| {
                        let mut seen = [false; 256];
                        (lo..=hi)
                            .filter(|&b| {
                                let c = classes[b as usize] as usize;
                                !std::mem::replace(&mut seen[c], true)
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        PlainReps { ascii, utf8 }
    }
}
